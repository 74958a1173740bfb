"""SFT on recovery traces, with the robustness mini-benchmark during training.

One process (CPU or one GPU)::

    recovery train sft --config recipes/tiny-reasoner/sft_recovery/config.yaml
    python -m recovery.training.sft --config recipes/tiny-reasoner/sft_recovery/config.yaml --max_steps 20

Several GPUs (DDP, or DeepSpeed ZeRO-2/3 through the accelerate configs)::

    accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m recovery.training.sft \\
        --config recipes/DeepSeek-R1-Distill-Qwen-1.5B/sft_recovery/config.yaml

The recipe's keys are fields of `recovery.training.configs.SFTScriptArguments`, ``trl.SFTConfig`` and
``trl.ModelConfig``. Rows are pre-tokenized in the policy's tokens (`recovery.training_data.tokens`): ``input_ids``
start with exactly the benchmark's prompt ids and ``completion_mask`` marks the recovery, so with
``completion_only_loss`` the loss falls on the recovery only. Rows built from a run that would not fit
``max_length`` are dropped and counted there; a ready dataset with such rows, or without ``input_ids``, is
refused (`check_sft_rows`): TRL would truncate the first and re-tokenize the second across the cut.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from recovery.generation import SamplingParams
from recovery.training import common, stage
from recovery.training.configs import SFTScriptArguments
from recovery.training_data import (
    GeneratorTeacher,
    PromptRenderer,
    QualityConfig,
    ToyTeacher,
    build_sft_dataset,
    load_run,
    run_prompts,
)
from recovery.training_data import SFTConfig as SFTDataConfig
from recovery.training_data.drops import Drops
from recovery.training_data.grpo import dedup_rows

logger = logging.getLogger(__name__)


def data_config(script_args: SFTScriptArguments, max_tokens: int | None = None) -> SFTDataConfig:
    """What the recipe's keys ask of the SFT data built from a run (`recovery.training_data.SFTConfig`)."""
    return SFTDataConfig(
        sources=list(script_args.sft_sources),
        quality=QualityConfig(
            require_doubt=script_args.require_doubt,
            max_overhead_pct=script_args.max_overhead_pct,
            overhead_basis=script_args.overhead_basis,
        ),
        max_tokens=max_tokens,
        **common.data_selection(script_args),
    )


def build_from_runs(
    script_args: SFTScriptArguments, tokenizer: Any, spec: Any, eval_set: Any = None, max_tokens: int | None = None
):
    """SFT recovery traces from ``run_dir`` and ``more_run_dirs`` (decontaminated against ``eval_set``), a
    (prompt, completion) pair kept once; rows longer than ``max_tokens`` (the trainer's ``max_length``) are
    dropped and counted."""

    config = data_config(script_args, max_tokens)
    parts = []
    for run_dir in [script_args.run_dir, *(script_args.more_run_dirs or [])]:
        data = load_run(run_dir)
        renderer = PromptRenderer.for_run(tokenizer, spec, data.config)
        built = build_sft_dataset(data, renderer, config, teacher=make_teacher(script_args, data), eval_set=eval_set)
        logger.info("SFT dataset from %s: %s; dropped: %s", run_dir, built.counts, built.drops)
        if len(built.dataset):
            parts.append(built.dataset)
    if not parts:
        raise ValueError(f"no SFT rows could be built from {script_args.run_dir} (drops: {built.drops})")
    return parts[0] if len(parts) == 1 else _concatenate_unique(parts)


def _concatenate_unique(parts: list[Any]):
    """The datasets of several runs, one after the other, without repeating a (prompt, completion) pair."""
    from datasets import Dataset, concatenate_datasets

    joined = concatenate_datasets(parts)
    drops = Drops()
    rows = dedup_rows(joined.to_list(), ("prompt", "completion"), drops)
    if drops.total():
        logger.info("dropped %d rows repeated across run directories", drops.total())
    return Dataset.from_list(rows, features=joined.features)


def check_sft_rows(dataset: Any, max_length: int | None) -> None:
    """Refuse SFT data that TRL would not train as built: rows without ``input_ids`` (SFTTrainer would tokenize
    prompt and prompt + completion apart, and the cut's tokens merge) or longer than ``max_length`` (it would
    cut ``</think>`` and the answer off)."""
    if "input_ids" not in dataset.column_names:
        raise ValueError(
            "the SFT dataset has no input_ids: text rows are re-tokenized by TRL across the prompt/completion "
            "boundary; build it with recovery (export or run_dir), which stores the benchmark's token ids"
        )
    if max_length is None:
        return
    over = sum(len(ids) > max_length for ids in dataset["input_ids"])
    if over:
        raise ValueError(
            f"{over} of {len(dataset)} SFT rows are longer than max_length={max_length} tokens and would be "
            "truncated; rebuild the data with that budget (rows over it are dropped and counted) or raise max_length"
        )


def make_teacher(script_args: SFTScriptArguments, data: Any = None):
    """``teacher: toy`` → the toy task generator; a model path / hub id → that model through HF generation."""
    if "teacher" not in script_args.sft_sources:
        return None
    if not script_args.teacher:
        raise ValueError("sft_sources includes 'teacher' but no teacher is set ('toy' or a model path)")

    if script_args.teacher == "toy":
        return ToyTeacher(restart=script_args.toy_teacher_restart, checks=script_args.toy_teacher_checks)
    from recovery.backends.hf import HFGenerator  # lazy: loads torch

    generator = HFGenerator(common.model_path(script_args.teacher), seed=script_args.build_seed)
    sampling = SamplingParams(n=script_args.teacher_samples, temperature=0.6, top_p=0.95, seed=script_args.build_seed)
    return GeneratorTeacher(
        generator,
        sampling=sampling,
        chat=run_prompts(data.config if data is not None else None),
        name=f"teacher:{script_args.teacher}",
    )


def check_recipe(script_args: SFTScriptArguments, data: stage.StageData) -> None:
    """Every check of an SFT recipe that needs no model and no data, made before either is loaded: what the
    data selection and quality keys ask, the teacher, where the data comes from and the robustness callback's
    keys. Raises `ConfigError` naming the key."""
    with stage.recipe_errors():
        if not script_args.dataset_name:
            data_config(script_args)
        if "teacher" in script_args.sft_sources and not script_args.teacher:
            raise ValueError("sft_sources includes 'teacher' but no teacher is set ('toy' or a model path)")
    stage.check_recipe(script_args, data)


def main(script_args: SFTScriptArguments, training_args: Any, model_args: Any):
    """Build (or load) the data, train with `trl.SFTTrainer` (`SeededSFTTrainer`) plus the `RobustnessCallback`,
    save."""
    from recovery.training.sft_trainer import SeededSFTTrainer  # lazy: loads transformers, trl

    data = stage.StageData(
        functools.partial(build_from_runs, max_tokens=training_args.max_length),
        "give dataset_name (a ready SFT dataset) or run_dir (a benchmark run to build it from)",
    )
    check_recipe(script_args, data)  # a bad recipe fails now, not after the model and data are loaded
    run = stage.prepare(script_args, training_args, model_args, data)
    for dataset in (run.train_dataset, run.eval_dataset):
        if dataset is not None:
            check_sft_rows(dataset, training_args.max_length)
    trainer = SeededSFTTrainer(**run.trainer_kwargs())
    run.train(trainer)
    return trainer


def make_parser():
    """``TrlParser((SFTScriptArguments, SFTConfig, ModelConfig))``."""
    return stage.trl_parser(SFTScriptArguments, "SFTConfig")


if __name__ == "__main__":
    stage.run_as_script(main, make_parser)
