"""GRPO on intervened prefixes with the `recovery.rewards`, and the robustness mini-benchmark during training.

One process (CPU or one GPU)::

    recovery train grpo --config recipes/tiny-reasoner/grpo_recovery/config.yaml
    python -m recovery.training.grpo --config recipes/tiny-reasoner/grpo_recovery/config.yaml --max_steps 10

Several GPUs::

    accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m recovery.training.grpo \\
        --config recipes/DeepSeek-R1-Distill-Qwen-1.5B/grpo_recovery/config.yaml

Keys: `recovery.training.configs.GRPOScriptArguments`, ``trl.GRPOConfig``, ``trl.ModelConfig``. Prompts are
raw text ending with the intervened reasoning (`recovery.training_data.grpo`), so the policy continues its
own trace; the other dataset columns reach the rewards as keyword arguments. Keep a KL term (``beta`` > 0)
and a small learning rate: 25 steps at lr 2e-4 without KL wrecked the tiny reasoner (issue 5).
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

from recovery.training import common
from recovery.training.configs import GRPOScriptArguments

logger = logging.getLogger(__name__)


def reward_functions(script_args: GRPOScriptArguments, tokenizer: Any = None, spec: Any = None) -> list[Any]:
    """The reward callables named by ``reward_funcs`` (short names of `recovery.rewards.REWARDS`, their
    ``__name__``, or ``package.module.function`` import paths). ``spec`` (the policy's conventions) gives
    the closing think tag the doubt and length rewards read up to; ``tokenizer`` (the policy's) counts the
    length reward's tokens with ``length_unit: tokens``."""
    think_close = getattr(spec, "think_close", "</think>")
    from recovery.rewards import CorrectnessReward, DoubtReward, LengthOverheadReward, RecoveryReward

    def correctness() -> CorrectnessReward:
        return CorrectnessReward(timeout_s=script_args.correctness_timeout_s)

    def doubt() -> DoubtReward:
        return DoubtReward(
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

    factories = {"correctness": correctness, "doubt": doubt, "length": length, "recovery": recovery}
    aliases = {
        "correctness_reward": "correctness",
        "doubt_reward": "doubt",
        "length_overhead_reward": "length",
        "recovery_reward": "recovery",
    }
    out = []
    for name in script_args.reward_funcs:
        key = aliases.get(name, name)
        if key in factories:
            out.append(factories[key]())
        elif "." in name:
            out.append(_imported_reward(name))
        else:
            raise ValueError(f"unknown reward {name!r}; use {sorted(factories)} or an import path")
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


def build_dataset(script_args: GRPOScriptArguments, tokenizer: Any, spec: Any, eval_set: Any = None):
    """The GRPO prompts: ``dataset_name`` loaded as is, or built from ``run_dir`` (then decontaminated)."""
    if script_args.dataset_name:
        return common.load_dataset_any(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_train_split
        )
    if not script_args.run_dir:
        raise ValueError("give dataset_name (ready GRPO prompts) or run_dir (a benchmark run to build them from)")
    from recovery.training_data import GRPOPromptConfig, PromptRenderer, grpo_rows, load_run

    data = load_run(script_args.run_dir)
    renderer = PromptRenderer.for_run(tokenizer, spec, data.config)
    config = GRPOPromptConfig(
        interventions=script_args.data_interventions,
        categories=script_args.data_categories,
        models=script_args.data_models,
        clean_fraction=script_args.clean_fraction,
        seed=script_args.build_seed,
    )
    built = grpo_rows(data, renderer, config, eval_set=eval_set)
    logger.info("GRPO prompts from %s: %d rows; dropped: %s", script_args.run_dir, len(built.rows), built.drops)
    if not built.rows:
        raise ValueError(f"no GRPO prompts could be built from {script_args.run_dir} (drops: {built.drops})")
    dataset = built.to_dataset()
    if script_args.save_dataset_to:
        dataset.save_to_disk(script_args.save_dataset_to)
    return dataset


def main(script_args: GRPOScriptArguments, training_args: Any, model_args: Any):
    """Build (or load) the prompts, train with `trl.GRPOTrainer` and the rewards plus the callback, save."""
    from transformers import set_seed
    from trl import GRPOTrainer, get_peft_config

    if not training_args.beta > 0:
        logger.warning(
            "GRPO without a KL term (beta=%s): the tiny reasoner collapsed this way; set beta > 0", training_args.beta
        )
    common.quiet_third_party()
    set_seed(training_args.seed)
    tokenizer = common.load_tokenizer(model_args, training_args)
    spec = common.model_spec(script_args, model_args, tokenizer)
    callback = common.make_callback(script_args)
    dataset = build_dataset(script_args, tokenizer, spec, common.eval_set(script_args, callback))
    train_dataset, eval_dataset = common.splits(dataset, script_args, training_args)
    training_args.model_init_kwargs = common.model_init_kwargs(model_args, training_args)
    rewards = reward_functions(script_args, tokenizer, spec)
    trainer = GRPOTrainer(
        model=common.model_path(model_args.model_name_or_path),
        reward_funcs=rewards,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    if callback is not None:
        callback.attach(trainer)
    try:
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        common.finish(trainer, training_args, tokenizer)
    finally:
        for reward in rewards:
            close = getattr(reward, "close", None)
            if callable(close):
                close()
    return trainer


def make_parser():
    """``TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))``."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    return TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main(*make_parser().parse_args_and_config())
