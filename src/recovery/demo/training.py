"""The demo's fine-tuning: SFT of the tiny reasoner on recovery traces (its own and the toy teacher's), then
optionally a short GRPO stage with the recovery rewards, each through the same entry points as any recipe
(`recovery.training.sft`, `recovery.training.grpo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recovery.demo.config import TOY_MAX_NEW_TOKENS

SFT_MODEL = "model-sft"  # the SFT model's folder under the demo's directory
GRPO_MODEL = "model-grpo"  # the SFT+GRPO model's


def _all_cpu_threads() -> None:
    # Generation of the tiny model runs on one thread (see recovery.backends.registry); training batches
    # are big enough to use every core.
    import os

    import torch

    torch.set_num_threads(os.cpu_count() or 1)


def train_sft(
    out: Path, data_runs: list[Path], eval_run: Path, steps: int, seed: int, lr: float, clean_fraction: float
) -> tuple[Path, float]:
    """SFT of the tiny reasoner on recovery traces built from ``data_runs`` (own recoveries + toy teacher,
    ``clean_fraction`` of clean traces), decontaminated against ``eval_run``'s problems. Returns the
    trained model folder and the training's seconds (TRL's ``train_runtime``)."""
    from recovery.training.sft import main, make_parser  # lazy: loads transformers, trl

    _all_cpu_threads()
    recipe = sft_recipe(out, data_runs, eval_run, steps, seed, lr, clean_fraction)
    trainer = main(*make_parser().parse_dict(recipe))
    return out / SFT_MODEL, train_runtime(trainer.state.log_history)


def sft_recipe(
    out: Path, data_runs: list[Path], eval_run: Path, steps: int, seed: int, lr: float, clean_fraction: float
) -> dict[str, Any]:
    """The keys of the demo's SFT, as a recipe file would give them (`train_sft`)."""
    model_dir = out / SFT_MODEL
    return {
        "model_name_or_path": "tiny-reasoner",
        "dtype": "float32",
        "run_dir": str(data_runs[0]),
        "more_run_dirs": [str(p) for p in data_runs[1:]],
        "model_spec": "tiny-reasoner",
        "sft_sources": ["own", "teacher"],
        "teacher": "toy",
        # The toy teacher restarts the chain after its doubt: recoveries that resume from the last correct step
        # taught the model to copy a state across the inserted text, which lowered adversarial robustness.
        "toy_teacher_restart": True,
        "toy_teacher_checks": True,  # the tiny reasoner's own style
        "clean_fraction": clean_fraction,
        "max_overhead_pct": 100.0,
        "decontaminate_run_dirs": [str(eval_run)],
        "robustness": False,
        "dataset_name": None,
        "output_dir": str(model_dir),
        "save_dataset_to": str(out / "sft-data"),  # what the model was trained on, for the curious
        "seed": seed,
        "max_steps": steps,
        "per_device_train_batch_size": 32,
        "learning_rate": lr,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 0.05,
        "completion_only_loss": True,
        "max_length": 512,
        "use_cpu": True,
        "bf16": False,
        # TRL turns it on by default; for a 1-M-parameter model it saves no memory worth having and
        # recomputes every forward pass in the backward one.
        "activation_checkpointing": False,
        "eval_strategy": "no",
        "logging_steps": 20,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
    }


def train_grpo(
    out: Path, data_run: Path, eval_run: Path, start: Path, steps: int, seed: int
) -> tuple[Path, dict[str, float], float]:
    """A short GRPO run (correctness + doubt + length rewards, KL term, small learning rate) from ``start``.
    Returns the trained model folder, each reward's mean over training (`reward_means`) and the training's
    seconds (TRL's ``train_runtime``)."""
    from recovery.training.grpo import main, make_parser  # lazy: loads transformers, trl

    _all_cpu_threads()
    trainer = main(*make_parser().parse_dict(grpo_recipe(out, data_run, eval_run, start, steps, seed)))
    history = trainer.state.log_history
    return out / GRPO_MODEL, reward_means(history), train_runtime(history)


def train_runtime(log_history: list[dict]) -> float:
    """The seconds the trainer spent in its training loop, as it logged them at the end (``train_runtime``)."""
    return float(next(entry["train_runtime"] for entry in reversed(log_history) if "train_runtime" in entry))


def grpo_recipe(out: Path, data_run: Path, eval_run: Path, start: Path, steps: int, seed: int) -> dict[str, Any]:
    """The keys of the demo's GRPO stage, as a recipe file would give them (`train_grpo`)."""
    return {
        "model_name_or_path": str(start),
        "dtype": "float32",
        "run_dir": str(data_run),
        "model_spec": "tiny-reasoner",
        "decontaminate_run_dirs": [str(eval_run)],
        "robustness": False,
        "dataset_name": None,
        "reward_funcs": ["correctness", "doubt", "length"],
        "output_dir": str(out / GRPO_MODEL),
        "seed": seed,
        "max_steps": steps,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": TOY_MAX_NEW_TOKENS,
        "learning_rate": 1.0e-5,
        "beta": 0.04,
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,  # as in SFT: only costs time on the tiny model
        "logging_steps": 1,  # every step: the reward means cover the whole run
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
    }


def reward_means(log_history: list[dict]) -> dict[str, float]:
    """Each reward's mean over training: the average of the ``rewards/<name>/mean`` values TRL logged
    (one per logging step), in the order the rewards were given."""
    logged: dict[str, list[float]] = {}
    for entry in log_history:
        for key, value in entry.items():
            if key.startswith("rewards/") and key.endswith("/mean"):
                logged.setdefault(key[len("rewards/") : -len("/mean")], []).append(float(value))
    return {name: sum(values) / len(values) for name, values in logged.items()}
