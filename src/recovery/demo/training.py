"""The demo's fine-tuning: SFT of the tiny reasoner on recovery traces (its own and the toy teacher's), then
optionally a short GRPO stage with the recovery rewards, each through the same entry points as any recipe
(`recovery.training.sft`, `recovery.training.grpo`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.demo.config import TOY_INTERVENTIONS, TOY_MAX_NEW_TOKENS, GRPOSize

SFT_MODEL = "model-sft"  # the SFT model's folder under the demo's directory
GRPO_MODEL = "model-grpo"  # the SFT+GRPO model's
GRPO_ONLY_MODEL = "model-grpo-only"  # the base model trained with GRPO alone (--grpo-only)


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
        # 32 rows a step, drawn at random and split into 4 micro-batches of similar lengths (transformers'
        # batch_rebalance): a random batch of 32 is padded to its longest row, about 1.6 times its tokens.
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 4,
        "train_sampling_strategy": "batch_rebalance",
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


@dataclass(frozen=True)
class GRPOStage:
    """One GRPO training of the demo: where it writes, the runs it reads and the model it starts from."""

    out: Path  # the demo's directory; the trained model goes to out / model
    data_run: Path  # the starting model measured on training problems: the prompts are chosen from it
    eval_run: Path  # the evaluation run, whose problems are kept out of the prompts
    start: Path | str  # the SFT model's folder, or the base model's name
    grpo: GRPOSize
    seed: int
    model: str = GRPO_MODEL
    timesteps: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)  # the callback measures these
    wandb: bool = False  # report the stage to W&B


def train_grpo(stage: GRPOStage) -> tuple[Path, list[dict], float]:
    """GRPO with the project's combined reward from ``stage.start`` on prompts chosen from ``stage.data_run``,
    decontaminated against ``stage.eval_run``. Returns the trained model folder, the trainer's log history
    (reward means, KL, robustness callback...) and the training's seconds (TRL's ``train_runtime``)."""
    from recovery.training.grpo import main, make_parser  # lazy: loads transformers, trl

    _all_cpu_threads()
    trainer = main(*make_parser().parse_dict(grpo_recipe(stage)))
    history = [dict(entry) for entry in trainer.state.log_history]
    return stage.out / stage.model, history, train_runtime(history)


def train_runtime(log_history: list[dict]) -> float:
    """The seconds the trainer spent in its training loop, as it logged them at the end (``train_runtime``)."""
    return float(next(entry["train_runtime"] for entry in reversed(log_history) if "train_runtime" in entry))


def grpo_recipe(stage: GRPOStage) -> dict[str, Any]:
    """The keys of the demo's GRPO stage, as a recipe file would give them (`train_grpo`). With ``stage.wandb``
    the trainer reports to W&B (TRL's reward, KL and length curves, the callback's robustness curves), in the
    project and mode the ``WANDB_*`` environment gives."""
    grpo = stage.grpo
    return {
        "model_name_or_path": str(stage.start),
        "dtype": "float32",
        "run_dir": str(stage.data_run),
        "model_spec": "tiny-reasoner",
        "decontaminate_run_dirs": [str(stage.eval_run)],
        # Groups that disagree: chains the starting model neither always solves nor (at the choice run's
        # temperature) always fails are where GRPO's advantage is not zero.
        "data_success_between": list(grpo.success_between),
        "data_timesteps": list(grpo.prompt_timesteps) if grpo.prompt_timesteps is not None else None,
        "clean_fraction": grpo.clean_fraction,  # clean prefixes keep clean accuracy in the objective
        "dataset_name": None,
        "reward_funcs": ["recovery"],  # the registry's combined reward, as a user passes it to TRL
        "recovery_weights": list(grpo.reward_weights),
        "output_dir": str(stage.out / stage.model),
        "seed": stage.seed,
        "max_steps": grpo.steps,
        "per_device_train_batch_size": grpo.batch_size,
        "num_generations": grpo.generations,
        "max_completion_length": TOY_MAX_NEW_TOKENS,
        "temperature": grpo.temperature,
        "learning_rate": grpo.learning_rate,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": 3,
        "beta": grpo.beta,
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,  # as in SFT: only costs time on the tiny model
        # The robustness curve over the GRPO steps: the callback's mini-benchmark at step 0, every k steps and
        # at the end (steps is a multiple of k). It measures the first held-out toy problems with the toy
        # writer's traces: a monitor during training, while the result is the benchmark run afterwards.
        "robustness": grpo.robustness_every > 0,
        "robustness_source": "toy",
        "robustness_interventions": list(TOY_INTERVENTIONS),  # every one, at the demo's timesteps
        "robustness_timesteps": list(stage.timesteps),
        "robustness_problems": grpo.robustness_problems,
        "robustness_samples": grpo.robustness_samples,
        "robustness_every_k_steps": grpo.robustness_every,
        "robustness_at_train_begin": True,
        "robustness_max_new_tokens": TOY_MAX_NEW_TOKENS,
        "logging_steps": 1,  # every step: the curves and the reward means cover the whole run
        "save_strategy": "no",
        "report_to": ["wandb"] if stage.wandb else "none",
        "run_name": f"recovery-demo-{stage.model}",
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
