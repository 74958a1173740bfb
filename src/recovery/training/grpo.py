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
import json
import logging
from collections.abc import Mapping
from typing import Any

from recovery.configs import ConfigError
from recovery.rewards import RewardSpec, build_reward, reward_spec
from recovery.training import common, stage
from recovery.training.configs import GRPOScriptArguments
from recovery.training_data import GRPOPromptConfig, PromptRenderer, grpo_rows, load_run
from recovery.training_data.tokens import trainer_prompt_ids

logger = logging.getLogger(__name__)


def reward_functions(script_args: GRPOScriptArguments, tokenizer: Any = None, spec: Any = None) -> list[Any]:
    """The reward callables named by ``reward_funcs``: a name of `recovery.rewards.REWARDS` (or a reward's
    ``__name__`` or class name) built by `recovery.rewards.build_reward`, or a ``package.module.attr`` import
    path (a class is built the same way, a function is used as it is). Each is built with its options:
    ``reward_options[name]`` over, for the built-ins, what the recipe's flat keys say (`flat_options`).
    ``spec`` (the policy's conventions) gives the closing think tag the rewards read up to; ``tokenizer``
    (the policy's) counts the length reward's tokens with ``length_unit: tokens``."""

    think_close = getattr(spec, "think_close", "</think>")
    given = reward_options(script_args)
    flat = flat_options(script_args)
    out = []
    for name in script_args.reward_funcs:
        options = _merged(flat.get(name, {}), given.get(name, {}))
        if "." in name:
            try:
                out.append(RewardSpec(_imported(name)).create(options, think_close=think_close, tokenizer=tokenizer))
            except (TypeError, ValueError) as err:
                raise ValueError(f"reward_options.{name}: {err}") from None
        else:
            out.append(build_reward(name, options, think_close=think_close, tokenizer=tokenizer))
    if not out:
        raise ValueError("reward_funcs is empty")
    return out


def check_rewards(script_args: GRPOScriptArguments) -> None:
    """Raise `ValueError` for a reward name `recovery.rewards.REWARDS` does not know (import paths are tried
    when built) or ``reward_options`` naming a reward that ``reward_funcs`` does not."""

    for name in script_args.reward_funcs:
        if "." not in name:
            reward_spec(name)
    reward_options(script_args)


def reward_options(script_args: GRPOScriptArguments) -> dict[str, dict[str, Any]]:
    """The recipe's ``reward_options`` (a mapping, or its JSON on the command line), each key one of
    ``reward_funcs``."""
    raw = script_args.reward_options
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as err:
            raise ValueError(f"reward_options: not a JSON mapping ({err})") from None
    if not isinstance(raw, Mapping) or not all(isinstance(v, Mapping) for v in raw.values()):
        raise ValueError(f"reward_options must map each reward name to its options, got {raw!r}")
    for name in raw:
        if name not in script_args.reward_funcs:
            raise ValueError(f"reward_options: {name!r} is not one of reward_funcs {list(script_args.reward_funcs)}")
    return {name: dict(options) for name, options in raw.items()}


def flat_options(script_args: GRPOScriptArguments) -> dict[str, dict[str, Any]]:
    """The built-in rewards' options as the recipe's flat keys (``doubt_*``, ``length_*``,
    ``correctness_timeout_s``, ``recovery_weights``) set them; ``reward_options`` goes over these."""
    correctness = {"timeout_s": script_args.correctness_timeout_s}
    doubt = {
        "pay_for": script_args.doubt_pay_for,
        "correctness": correctness,
        "categories": script_args.doubt_categories,
        "only_intervened": script_args.doubt_only_intervened,
        "first_sentences": script_args.doubt_first_sentences,
    }
    length = {
        "max_overhead": script_args.length_max_overhead,
        "free_overhead": script_args.length_free_overhead,
        "unit": script_args.length_unit,
    }
    recovery = {
        "correctness": correctness,
        "doubt": doubt,
        "length": length,
        "weights": list(script_args.recovery_weights),
    }
    return {"correctness": correctness, "doubt": doubt, "length": length, "recovery": recovery}


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, nested mappings merged key by key (a part's options in the combined reward)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in base.items()}
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _imported(path: str) -> Any:
    """The attribute at ``package.module.attr`` (a reward class or function)."""
    module, _, attr = path.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"reward_funcs: cannot import {path!r}: {err}") from None
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

    data = load_run(script_args.run_dir)
    renderer = PromptRenderer.for_run(tokenizer, spec, data.config)
    config = GRPOPromptConfig(
        max_prompt_tokens=max_prompt_tokens,
        success_between=_success_range(script_args),
        timesteps=script_args.data_timesteps,
        **common.data_selection(script_args),
    )
    built = grpo_rows(data, renderer, config, eval_set=eval_set)
    logger.info("GRPO prompts from %s: %d rows; dropped: %s", script_args.run_dir, len(built.rows), built.drops)
    if not built.rows:
        raise ValueError(f"no GRPO prompts could be built from {script_args.run_dir} (drops: {built.drops})")
    return built.to_dataset()


class _TokenizerNotLoaded:
    """What the rewards are built with when the recipe is checked, before the policy's tokenizer is loaded:
    constructing a reward only checks that a tokenizer is given; nothing is counted with it then."""

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        raise RuntimeError("the recipe check's rewards count no tokens")


def check_recipe(script_args: GRPOScriptArguments, training_args: Any) -> int | None:
    """Every check of a GRPO recipe that needs no model and no data, made before either is loaded: the reward
    names, their options and the options' values (each reward is built once and closed), the prompt budget, where
    the data comes from and the robustness callback's keys. Raises `ConfigError` naming the key; returns the
    prompt budget (`prompt_budget`)."""
    with stage.recipe_errors():
        check_rewards(script_args)
        for reward in reward_functions(script_args, _TokenizerNotLoaded()):
            close = getattr(reward, "close", None)
            if callable(close):
                close()
        budget = prompt_budget(script_args, training_args)
        if not script_args.dataset_name:
            GRPOPromptConfig(
                max_prompt_tokens=budget,
                success_between=_success_range(script_args),
                timesteps=script_args.data_timesteps,
                **common.data_selection(script_args),
            )
    stage.check_recipe(script_args, _data(budget))
    return budget


def _success_range(script_args: GRPOScriptArguments) -> tuple[float, float] | None:
    """``data_success_between`` as the (low, high) pair `GRPOPromptConfig.success_between` takes."""
    chosen = script_args.data_success_between
    if chosen is None:
        return None
    if len(chosen) != 2:
        raise ValueError(f"data_success_between must be [low, high], got {chosen!r}")
    return float(chosen[0]), float(chosen[1])


def _data(budget: int | None) -> stage.StageData:
    return stage.StageData(
        functools.partial(build_from_run, max_prompt_tokens=budget),
        "give dataset_name (ready GRPO prompts) or run_dir (a benchmark run to build them from)",
    )


def main(script_args: GRPOScriptArguments, training_args: Any, model_args: Any):
    """Build (or load) the prompts, train with `trl.GRPOTrainer` and the rewards plus the callback, save."""
    from trl import GRPOTrainer

    if not training_args.beta > 0:
        logger.warning(
            "GRPO without a KL term (beta=%s): the tiny reasoner collapsed this way; set beta > 0", training_args.beta
        )
    budget = check_recipe(script_args, training_args)  # a bad recipe fails now, not after the data is built
    run = stage.prepare(script_args, training_args, model_args, _data(budget))
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
