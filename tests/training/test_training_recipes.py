"""Every YAML under recipes/ loads with the installed TRL / accelerate, strictly (unknown keys are errors).

* ``recipes/<Model>/{sft,grpo}_recovery/config.yaml`` → `recovery.training.commands.make_parser` (TrlParser
  over our script arguments, ``trl.SFTConfig``/``trl.GRPOConfig`` and ``trl.ModelConfig``);
* ``recipes/tiny-reasoner/base/*.yaml`` → the toy trainer's own TrlParser (`recovery.toy.train.make_parser`);
* ``recipes/accelerate_configs/*.yaml`` → accelerate's own loader (``accelerate launch --config_file``).

GPU recipes say ``bf16: true``, which `transformers.TrainingArguments` refuses on a machine without a GPU,
so on CPU they are loaded with ``--bf16 false --use_cpu true`` appended; every other key is the recipe's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from recovery.training.commands import make_parser

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

ALL_YAML = sorted(p for p in RECIPES.rglob("*.y*ml") if p.suffix in (".yaml", ".yml"))
TRAINING = [p for p in ALL_YAML if p.parent.name in ("sft_recovery", "grpo_recovery")]
ACCELERATE = [p for p in ALL_YAML if p.parent.name == "accelerate_configs"]
TOY = [p for p in ALL_YAML if p.parent.name == "base" and p.parent.parent.name == "tiny-reasoner"]


def _cpu_overrides(path: Path) -> list[str]:
    import torch

    bf16 = yaml.safe_load(path.read_text()).get("bf16")
    return ["--bf16", "false", "--use_cpu", "true"] if bf16 and not torch.cuda.is_available() else []


def _check_warmup(raw: dict, training_args) -> None:
    """A recipe's ``warmup_steps`` below 1 is a ratio of the training steps (transformers >= 5), not 0 steps."""
    warmup = raw.get("warmup_steps", 0)
    expected = math.ceil(1000 * warmup) if 0 < warmup < 1 else int(warmup)
    assert training_args.get_warmup_steps(1000) == expected


def test_every_yaml_is_covered():
    assert {p.parent.name for p in TRAINING} == {"sft_recovery", "grpo_recovery"}
    assert {p.name for p in ACCELERATE} >= {"ddp.yaml", "zero2.yaml", "zero3.yaml"}
    assert {p.parent.parent.name for p in TRAINING} >= {
        "DeepSeek-R1-Distill-Qwen-1.5B",
        "DeepSeek-R1-Distill-Qwen-7B",
        "tiny-reasoner",
    }
    assert set(ALL_YAML) == set(TRAINING) | set(ACCELERATE) | set(TOY), "a recipe YAML no test loads"


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: str(p.relative_to(RECIPES)))
def test_training_recipe_loads_through_trlparser(path: Path):
    stage = "sft" if path.parent.name == "sft_recovery" else "grpo"
    raw = yaml.safe_load(path.read_text())
    script_args, training_args, model_args = make_parser(stage).parse_args_and_config(
        args=["--config", str(path), *_cpu_overrides(path)]
    )
    assert type(training_args).__name__ == ("SFTConfig" if stage == "sft" else "GRPOConfig")
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    assert script_args.run_dir == raw["run_dir"]
    _check_warmup(raw, training_args)
    if stage == "grpo":  # no KL + a large learning rate wrecks a small policy (README, "GRPO on the demo": 5e-5 did)
        assert training_args.beta > 0
        assert training_args.learning_rate <= 2e-5
    else:
        assert training_args.completion_only_loss is True
    assert_lengths_bounded(stage, script_args, training_args)
    if path.parent.parent.name == "tiny-reasoner":  # CPU recipes run as written
        assert training_args.use_cpu and not training_args.bf16 and not _cpu_overrides(path)


@pytest.mark.parametrize("path", TRAINING + TOY, ids=lambda p: str(p.relative_to(RECIPES)))
def test_recipe_checkpointing_key_is_read_without_a_deprecation_warning(path: Path):
    """The recipes name ``activation_checkpointing`` (transformers' new name); it is read under the name the
    installed transformers has, and building the trainer config warns about no deprecated key."""
    import warnings

    from recovery.toy.train import make_parser as toy_parser

    raw = yaml.safe_load(path.read_text())
    assert "gradient_checkpointing" not in raw and "gradient_checkpointing_kwargs" not in raw
    parser = toy_parser() if path in TOY else make_parser("sft" if path.parent.name == "sft_recovery" else "grpo")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*checkpointing", category=FutureWarning)
        _, training_args, _ = parser.parse_args_and_config(args=["--config", str(path), *_cpu_overrides(path)])
    assert checkpointing(training_args) is raw["activation_checkpointing"]


def checkpointing(training_args) -> bool:
    """Whether the trainer will checkpoint activations, under the installed transformers' name."""
    if hasattr(training_args, "activation_checkpointing"):
        return training_args.activation_checkpointing
    return training_args.gradient_checkpointing


@pytest.mark.parametrize("key", ["activation_checkpointing", "gradient_checkpointing"])
def test_either_checkpointing_name_is_read_as_the_installed_one(tmp_path, key: str):
    import warnings

    parser = make_parser("sft")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*checkpointing", category=FutureWarning)
        for value in (True, False):
            _, training_args, _ = parser.parse_dict({"output_dir": str(tmp_path), "use_cpu": True, key: value})
            assert checkpointing(training_args) is value
            _, training_args, _ = make_parser("sft").parse_args_and_config(
                args=["--output_dir", str(tmp_path), "--use_cpu", "true", f"--{key}", str(value).lower()]
            )
            assert checkpointing(training_args) is value
        # Neither name: TRL's default (on), still without the warning.
        _, training_args, _ = parser.parse_dict({"output_dir": str(tmp_path), "use_cpu": True})
        assert checkpointing(training_args) is True


def test_both_checkpointing_names_at_once_are_refused(tmp_path):
    with pytest.raises(ValueError, match="activation_checkpointing and gradient_checkpointing are the same setting"):
        make_parser("sft").parse_dict(
            {"output_dir": str(tmp_path), "activation_checkpointing": False, "gradient_checkpointing": True}
        )


def test_before_the_rename_the_new_name_is_read_as_the_old_one():
    """transformers 5.22 (the floor) has only ``gradient_checkpointing``: a recipe's new name maps to it."""
    from dataclasses import dataclass

    from recovery.recipe_parser import installed_names, renamed, renamed_flags

    @dataclass
    class OldArguments:
        gradient_checkpointing: bool = True
        gradient_checkpointing_kwargs: dict | None = None

    names = installed_names([OldArguments])
    assert renamed({"activation_checkpointing": False, "max_steps": 3}, names) == {
        "gradient_checkpointing": False,
        "max_steps": 3,
    }
    assert renamed_flags(["--activation_checkpointing_kwargs={}", "--max_steps", "3"], names) == [
        "--gradient_checkpointing_kwargs={}",
        "--max_steps",
        "3",
    ]
    assert installed_names([]) == {}


# The authors' budget for prompt + output; the distills' native context is larger, the tiny reasoner's 1,024.
PROMPT_AND_OUTPUT = 32768


def assert_lengths_bounded(stage: str, script_args, training_args) -> None:
    """Every length TRL and vLLM need is set, so no step exceeds them: SFT rows fit ``max_length`` (the
    builder's budget); a GRPO prompt has a token budget that fits beside ``max_completion_length``."""
    from recovery.training.grpo import prompt_budget

    if stage == "sft":
        assert training_args.max_length is not None and training_args.max_length <= PROMPT_AND_OUTPUT
        return
    budget = prompt_budget(script_args, training_args)
    assert script_args.max_prompt_tokens == budget is not None
    total = budget + training_args.max_completion_length
    assert total <= PROMPT_AND_OUTPUT
    if training_args.use_vllm:
        assert training_args.vllm_max_model_length == total


def test_unknown_recipe_key_is_an_error(tmp_path, recipes):
    text = (recipes / "tiny-reasoner" / "sft_recovery" / "config.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "\nlearning_rat: 1.0e-3\n")
    with pytest.raises(ValueError, match="learning_rat"):
        make_parser("sft").parse_args_and_config(args=["--config", str(bad)])


@pytest.mark.parametrize("path", TOY, ids=lambda p: p.name)
def test_tiny_reasoner_pretraining_recipe_loads(path: Path):
    from recovery.toy.train import make_parser as toy_parser

    data_args, training_args, model_args = toy_parser().parse_args_and_config(args=["--config", str(path)])
    assert training_args.use_cpu and model_args.hidden_size > 0 and data_args.num_train_problems > 0
    _check_warmup(yaml.safe_load(path.read_text()), training_args)


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.name)
def test_accelerate_config_loads(path: Path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))  # ClusterConfig.from_yaml_file: unknown keys raise
    assert str(config.mixed_precision) == "bf16"
    stage = config.deepspeed_config.get("zero_stage") if config.deepspeed_config else None
    assert {"ddp.yaml": None, "zero2.yaml": 2, "zero3.yaml": 3}.get(path.name, stage) == stage


def test_the_demo_trains_without_activation_checkpointing(tmp_path):
    """TRL turns activation checkpointing on by default; the demo's tiny model only pays time for it. Its
    recipes turn it off under the new name, read without a deprecation warning on the installed transformers."""
    import warnings

    from recovery.demo.config import GRPOSize
    from recovery.demo.training import GRPOStage, grpo_recipe, sft_recipe

    runs = [tmp_path / "teacher", tmp_path / "own"]
    recipes = {
        "sft": sft_recipe(tmp_path, runs, tmp_path / "before", 300, 0, 1e-3, 0.5),
        "grpo": grpo_recipe(
            GRPOStage(tmp_path, runs[0], tmp_path / "before", tmp_path / "model-sft", GRPOSize(20, 4), seed=0)
        ),
    }
    for stage, recipe in recipes.items():
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*checkpointing", category=FutureWarning)
            _, training_args, _ = make_parser(stage).parse_dict(recipe)
        assert checkpointing(training_args) is False, stage
