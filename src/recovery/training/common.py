"""What `recovery.training.sft` and `recovery.training.grpo` read from a recipe: model and tokenizer
resolution, the policy's conventions, the callback, dataset loading, the data selection keys,
decontamination and the eval split. How a stage runs with them is `recovery.training.stage`."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from recovery.models import get_spec, spec_for, weights_location
from recovery.toy import heldout_problems
from recovery.training.configs import RecoveryScriptArguments, callback_config
from recovery.training_data import EvalSet

logger = logging.getLogger(__name__)


#: The oldest trl and transformers the training code runs as written on, and what needs each. Below them a recipe
#: would still run, doing something else: TRL < 1.0 passes reward functions no ``log_metric`` / ``log_extra`` (the
#: rewards' metrics and completion columns vanish from the logs), transformers < 5.22 loads the DeepSeek-R1-Distill
#: tokenizer (a byte-level tokenizer whose config names LlamaTokenizerFast) as a SentencePiece one that drops spaces
#: and newlines, and < 5 has no ratio ``warmup_steps`` (the recipes' ``warmup_steps: 0.05``). pyproject.toml declares the same floors (a test checks), and CI runs the
#: training, rewards and training-data tests on exactly these versions (``.ci/run``, ``.ci/floors.py``).
REQUIRED_VERSIONS = {
    "trl": ("1.0", "GRPOTrainer passes the reward functions log_metric / log_extra"),
    "transformers": (
        "5.22",
        "the DeepSeek-R1-Distill tokenizer loads as the byte-level tokenizer it is (below: spaces and newlines "
        "dropped); a float warmup_steps (the recipes' 0.05) is a ratio",
    ),
}


def check_versions() -> None:
    """Raise `RuntimeError` naming every package of `REQUIRED_VERSIONS` installed below its floor, and why it
    matters: a training stage refuses to start rather than silently train differently."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    problems = []
    for name, (floor, needed_for) in REQUIRED_VERSIONS.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            problems.append(f"{name} is not installed (needs >= {floor}: {needed_for})")
            continue
        if Version(installed) < Version(floor):
            problems.append(f"{name} {installed} is older than {floor} ({needed_for})")
    if problems:
        raise RuntimeError(
            "recovery's training needs newer packages: " + "; ".join(problems) + ". Install recovery[train]."
        )


def quiet_third_party() -> None:
    """Silence the noise the project's own training calls cause: DeepSpeed (imported by accelerate and
    transformers when installed) announces on import that it found no GPU, at warning level, on every CPU
    run; with the accelerator named and its logger at warning level, only its real warnings remain."""

    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - training needs torch
        cuda = False
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)


def model_path(name_or_path: str | None) -> str:
    """``tiny-reasoner`` → the checkpoint shipped with the package; anything else is returned as is."""
    if not name_or_path:
        raise ValueError("model_name_or_path is required (a local folder, a hub id or 'tiny-reasoner')")
    return weights_location(name_or_path)


def load_tokenizer(model_args: Any, training_args: Any) -> Any:
    """The policy's tokenizer (left padding, as generation wants; TRL pads training batches itself)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        model_path(model_args.model_name_or_path),
        revision=model_args.model_revision,
        trust_remote_code=getattr(training_args, "trust_remote_code", False),
        padding_side="left",
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def model_spec(script_args: RecoveryScriptArguments, model_args: Any, tokenizer: Any):
    """The policy's conventions: ``model_spec`` when set, else from the model name and tokenizer."""

    if script_args.model_spec:
        return get_spec(script_args.model_spec)
    return spec_for(model_args.model_name_or_path, tokenizer)


def model_init_kwargs(model_args: Any, training_args: Any) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments (as TRL's own scripts build them), recipe overrides on top."""
    kwargs: dict[str, Any] = {
        "revision": model_args.model_revision,
        "trust_remote_code": getattr(training_args, "trust_remote_code", False),
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    if training_args.model_init_kwargs:
        kwargs.update(training_args.model_init_kwargs)
    return kwargs


def recipe_config(script_args: RecoveryScriptArguments) -> dict[str, Any]:
    """The recipe's script arguments as flat W&B config keys (data sources and filters, ``clean_fraction``,
    the reward and quality settings, the ``robustness_*`` keys), named as in the recipe file.

    transformers' ``WandbCallback`` logs only the training arguments and the model config; these are what
    else tells one recipe's run from another's. Their names cannot clash with the training arguments':
    `trl.TrlParser` parses both into one namespace.
    """
    return dataclasses.asdict(script_args)


def make_callback(script_args: RecoveryScriptArguments):
    """The `RobustnessCallback` of the ``robustness_*`` keys (None when ``robustness`` is off)."""
    if not script_args.robustness:
        return None
    from recovery.training.callback import RobustnessCallback  # lazy: loads transformers

    return RobustnessCallback(callback_config(script_args))


def eval_set(script_args: RecoveryScriptArguments, callback: Any = None):
    """Problems to keep out of training data: the callback's, ``decontaminate_run_dirs``' and toy held-out."""

    out = EvalSet(name="eval")
    if callback is not None:
        out = out.union(EvalSet.from_problems(callback.eval_problems, name="robustness-callback"))
    for run_dir in script_args.decontaminate_run_dirs or ():
        out = out.union(EvalSet.from_run(run_dir))
    if script_args.decontaminate_toy_heldout > 0:
        out = out.union(
            EvalSet.from_problems(heldout_problems(script_args.decontaminate_toy_heldout), name="toy-heldout")
        )
    return out


def load_dataset_any(name: str, config: str | None = None, split: str = "train"):
    """A dataset from a ``save_to_disk`` folder, a Parquet/JSON(L)/CSV file or folder of them, or the Hub.

    A `DatasetDict` on disk is returned whole; files become a `DatasetDict` with one ``train`` split.
    """
    import datasets

    path = Path(name)
    if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        return datasets.load_from_disk(str(path))
    suffixes = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
    if path.is_file() and path.suffix in suffixes:
        return datasets.load_dataset(suffixes[path.suffix], data_files={split: str(path)})
    if path.is_dir():
        for suffix, kind in suffixes.items():
            files = sorted(str(p) for p in path.rglob(f"*{suffix}"))
            if files:
                return datasets.load_dataset(kind, data_files={split: files})
        raise FileNotFoundError(f"{path}: no save_to_disk dataset and no data files")
    return datasets.load_dataset(name, name=config)


def splits(dataset: Any, script_args: RecoveryScriptArguments, training_args: Any) -> tuple[Any, Any]:
    """``(train, eval)``: the named splits of a `DatasetDict`, or a held-out ``eval_fraction`` when the
    trainer evaluates and there is no test split (eval is None when ``eval_strategy`` is ``no``)."""
    import datasets

    wants_eval = str(getattr(training_args, "eval_strategy", "no")) not in ("no", "IntervalStrategy.NO")
    if isinstance(dataset, datasets.DatasetDict):
        train = dataset[script_args.dataset_train_split]
        if script_args.dataset_test_split in dataset:
            return train, dataset[script_args.dataset_test_split] if wants_eval else None
        dataset = train
    if not wants_eval:
        return dataset, None
    if len(dataset) < 2 or script_args.eval_fraction <= 0:
        raise ValueError(
            "eval_strategy is set but there is no eval data: give a test split or eval_fraction > 0 "
            "(or set eval_strategy: 'no' and use robustness_every_k_steps)"
        )
    n_eval = max(1, round(len(dataset) * script_args.eval_fraction))
    parts = dataset.train_test_split(test_size=n_eval, seed=getattr(training_args, "seed", 0), shuffle=True)
    return parts["train"], parts["test"]


def data_selection(script_args: RecoveryScriptArguments) -> dict[str, Any]:
    """The recipe's keys that choose what a dataset builder takes from a run, as the keyword arguments both
    `recovery.training_data.SFTConfig` and `recovery.training_data.GRPOPromptConfig` accept."""
    return {
        "interventions": script_args.data_interventions,
        "categories": script_args.data_categories,
        "models": script_args.data_models,
        "clean_fraction": script_args.clean_fraction,
        "seed": script_args.build_seed,
    }


__all__ = [
    "data_selection",
    "eval_set",
    "load_dataset_any",
    "load_tokenizer",
    "make_callback",
    "model_init_kwargs",
    "model_path",
    "model_spec",
    "quiet_third_party",
    "recipe_config",
    "splits",
]
