"""GRPO on intervened prefixes with the `recovery.rewards`, and the robustness mini-benchmark during training.

One process (CPU or one GPU)::

    recovery train grpo --config recipes/tiny-reasoner/grpo_recovery/config.yaml
    python -m recovery.training.grpo --config recipes/tiny-reasoner/grpo_recovery/config.yaml --max_steps 10

Several GPUs::

    accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m recovery.training.grpo \\
        --config recipes/DeepSeek-R1-Distill-Qwen-1.5B/grpo_recovery/config.yaml

Keys: `recovery.training.configs.GRPOScriptArguments`, ``trl.GRPOConfig``, ``trl.ModelConfig``. Prompts are
raw text ending with the intervened reasoning (`recovery.training_data.grpo`), so the policy continues its
own trace; the other dataset columns reach the rewards as keyword arguments. Every length is bounded
(`prompt_budget`): prompts over ``max_prompt_tokens`` are dropped and counted when the data is built (a
ready dataset with such prompts is refused), and with vLLM ``max_prompt_tokens + max_completion_length``
must fit ``vllm_max_model_length``, so no GRPO step can exceed it. Keep a KL term (``beta`` > 0)
and a small learning rate: without the KL pull towards the starting model, and with a large step, a few
updates move a small policy far from it and its clean accuracy collapses.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

from recovery.configs import ConfigError
from recovery.training import common, stage
from recovery.training.configs import GRPOScriptArguments

logger = logging.getLogger(__name__)


def reward_functions(script_args: GRPOScriptArguments, tokenizer: Any = None, spec: Any = None) -> list[Any]:
    """The reward callables named by ``reward_funcs``: built-in rewards (`recovery.rewards.reward_class`: a
    short name of `recovery.rewards.REWARDS`, a ``__name__`` or a class name) configured by the recipe's
    reward keys, or ``package.module.function`` import paths. ``spec`` (the policy's conventions) gives
    the closing think tag the doubt and length rewards read up to; ``tokenizer`` (the policy's) counts the
    length reward's tokens with ``length_unit: tokens``."""
    from recovery.rewards import (
        REWARDS,
        CorrectnessReward,
        DoubtReward,
        LengthOverheadReward,
        RecoveryReward,
        reward_class,
    )

    think_close = getattr(spec, "think_close", "</think>")

    def correctness() -> CorrectnessReward:
        return CorrectnessReward(timeout_s=script_args.correctness_timeout_s)

    def doubt() -> DoubtReward:
        return DoubtReward(
            pay_for=script_args.doubt_pay_for,
            correctness=correctness() if script_args.doubt_pay_for == "recovery" else None,
            categories=script_args.doubt_categories,
            only_intervened=script_args.doubt_only_intervened,
            first_sentences=script_args.doubt_first_sentences,
            think_close=think_close,
        )

    def length() -> LengthOverheadReward:
        column = "reference_tokens" if script_args.length_unit == "tokens" else "reference_length"
        return LengthOverheadReward(
            max_overhead=script_args.length_max_overhead,
            free_overhead=script_args.length_free_overhead,
            unit=script_args.length_unit,
            reference_column=column,
            think_close=think_close,
            tokenizer=tokenizer if script_args.length_unit == "tokens" else None,
        )

    def recovery() -> RecoveryReward:
        weights = list(script_args.recovery_weights)
        if len(weights) != 3:
            raise ValueError(f"recovery_weights needs 3 numbers (correctness, doubt, length), got {weights}")
        return RecoveryReward(
            correctness(),
            doubt(),
            length(),
            correctness_weight=weights[0],
            doubt_weight=weights[1],
            length_weight=weights[2],
        )

    # How the recipe's keys configure each built-in reward.
    configured = {
        CorrectnessReward: correctness,
        DoubtReward: doubt,
        LengthOverheadReward: length,
        RecoveryReward: recovery,
    }
    out = []
    for name in script_args.reward_funcs:
        if "." in name:
            out.append(_imported_reward(name))
            continue
        try:
            cls = reward_class(name)
        except ValueError:
            raise ValueError(f"unknown reward {name!r}; use {sorted(REWARDS)} or an import path") from None
        out.append(configured[cls]())
    if not out:
        raise ValueError("reward_funcs is empty")
    return out


def _imported_reward(path: str) -> Any:
    """The reward at ``package.module.attr``: a function as it is, a class instantiated with no arguments (TRL
    calls a reward with the batch's keyword arguments, which a class would take as constructor arguments)."""
    module, _, attr = path.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"reward_funcs: cannot import {path!r}: {err}") from None
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"reward_funcs: {path!r} is a {type(obj).__name__}, not a function or a reward class")
    return obj


def prompt_budget(script_args: GRPOScriptArguments, training_args: Any) -> int | None:
    """The longest prompt a GRPO step may take, in the policy's tokens: ``max_prompt_tokens``, or with vLLM
    whatever ``vllm_max_model_length`` leaves beside ``max_completion_length``. A ``max_prompt_tokens`` that
    does not fit beside the completion is a `ConfigError` (vLLM would refuse or cut the step's requests)."""
    budget = script_args.max_prompt_tokens
    window = training_args.vllm_max_model_length if training_args.use_vllm else None
    if window is None:
        return budget
    room = window - (training_args.max_completion_length or 0)
    if room < 1 or (budget is not None and budget > room):
        raise ConfigError(
            f"max_prompt_tokens ({budget}) + max_completion_length ({training_args.max_completion_length}) "
            f"must fit vllm_max_model_length ({window})"
        )
    return room if budget is None else budget


def check_prompt_lengths(dataset: Any, tokenizer: Any, budget: int | None) -> None:
    """Refuse a ready GRPO dataset with prompts longer than ``budget`` tokens as GRPOTrainer tokenizes them."""
    if budget is None:
        return
    from recovery.training_data.tokens import trainer_prompt_ids

    over = sum(len(trainer_prompt_ids(tokenizer, prompt)) > budget for prompt in dataset["prompt"])
    if over:
        raise ValueError(
            f"{over} of {len(dataset)} GRPO prompts are longer than {budget} tokens; rebuild the data with "
            "max_prompt_tokens (prompts over it are dropped and counted) or raise the budget"
        )


def build_from_run(
    script_args: GRPOScriptArguments,
    tokenizer: Any,
    spec: Any,
    eval_set: Any = None,
    max_prompt_tokens: int | None = None,
):
    """GRPO prompts from the chains of ``run_dir`` (decontaminated against ``eval_set``); prompts longer than
    ``max_prompt_tokens`` are dropped and counted."""
    from recovery.training_data import GRPOPromptConfig, PromptRenderer, grpo_rows, load_run

    data = load_run(script_args.run_dir)
    renderer = PromptRenderer.for_run(tokenizer, spec, data.config)
    config = GRPOPromptConfig(max_prompt_tokens=max_prompt_tokens, **common.data_selection(script_args))
    built = grpo_rows(data, renderer, config, eval_set=eval_set)
    logger.info("GRPO prompts from %s: %d rows; dropped: %s", script_args.run_dir, len(built.rows), built.drops)
    if not built.rows:
        raise ValueError(f"no GRPO prompts could be built from {script_args.run_dir} (drops: {built.drops})")
    return built.to_dataset()


def main(script_args: GRPOScriptArguments, training_args: Any, model_args: Any):
    """Build (or load) the prompts, train with `trl.GRPOTrainer` and the rewards plus the callback, save."""
    from trl import GRPOTrainer

    if not training_args.beta > 0:
        logger.warning(
            "GRPO without a KL term (beta=%s): the tiny reasoner collapsed this way; set beta > 0", training_args.beta
        )
    budget = prompt_budget(script_args, training_args)
    data = stage.StageData(
        functools.partial(build_from_run, max_prompt_tokens=budget),
        "give dataset_name (ready GRPO prompts) or run_dir (a benchmark run to build them from)",
    )
    run = stage.prepare(script_args, training_args, model_args, data)
    if script_args.dataset_name:
        check_prompt_lengths(run.train_dataset, run.tokenizer, budget)
    rewards = reward_functions(script_args, run.tokenizer, run.spec)
    trainer = GRPOTrainer(reward_funcs=rewards, **run.trainer_kwargs())
    try:
        run.train(trainer)
    finally:
        for reward in rewards:
            close = getattr(reward, "close", None)
            if callable(close):
                close()
    return trainer


def make_parser():
    """``TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))``."""
    return stage.trl_parser(GRPOScriptArguments, "GRPOConfig")


if __name__ == "__main__":
    stage.run_as_script(main, make_parser)
