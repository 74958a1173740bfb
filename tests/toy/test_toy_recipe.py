"""The training recipe parses with TrlParser and a few steps of it run end to end on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "tiny-reasoner" / "base" / "sft.yaml"


def parse(*extra: str):
    from recovery.toy.train import make_parser

    return make_parser().parse_args_and_config(args=["--config", str(RECIPE), *extra])


def test_recipe_parses_into_trl_dataclasses():
    from trl import SFTConfig

    from recovery.toy.model import TinyModelArguments
    from recovery.toy.train import ToyDataArguments

    data_args, training_args, model_args = parse()
    assert isinstance(data_args, ToyDataArguments) and isinstance(model_args, TinyModelArguments)
    assert isinstance(training_args, SFTConfig)
    assert training_args.use_cpu and not training_args.bf16 and not training_args.gradient_checkpointing
    assert training_args.completion_only_loss
    assert model_args.hidden_size == 128 and model_args.num_hidden_layers == 4
    # the recipe's task sizes are the defaults the held-out set and the pipeline use
    from recovery.toy.tasks import ToyTaskConfig

    assert data_args.task_config() == ToyTaskConfig()


@pytest.mark.slow
def test_a_few_training_steps_write_a_loadable_checkpoint(tmp_path):
    from recovery.toy.model import load_tiny_reasoner
    from recovery.toy.train import main

    data_args, training_args, model_args = parse(
        "--output_dir",
        str(tmp_path / "run"),
        "--max_steps",
        "2",
        "--num_train_problems",
        "64",
        "--per_device_train_batch_size",
        "8",
        "--num_eval_problems",
        "0",
        "--export_dir",
        str(tmp_path / "ckpt"),
        "--hidden_size",
        "32",
        "--num_hidden_layers",
        "1",
        "--intermediate_size",
        "64",
        "--tokenizer_traces",
        "64",
        "--logging_steps",
        "1",
        "--disable_tqdm",
        "true",
    )
    metrics = main(data_args, training_args, model_args)
    assert metrics["train_steps"] == 2
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["train_steps"] == 2
    model, tok = load_tiny_reasoner(tmp_path / "ckpt")
    assert model.config.hidden_size == 32 and tok.chat_template


STAGE_TWO = RECIPE.with_name("sft_layouts.yaml")


def test_stage_two_recipe_continues_stage_one_on_varied_layouts():
    from recovery.toy.train import make_parser

    data_args, training_args, _ = make_parser().parse_args_and_config(args=["--config", str(STAGE_TWO)])
    stage_one, stage_one_training, _ = parse()
    assert data_args.init_from == stage_one_training.output_dir  # stage 2 starts where stage 1 wrote
    assert 0 < data_args.layout_rate <= 1 and data_args.task_seed != stage_one.task_seed  # fresh problems
    assert data_args.task_config() == stage_one.task_config()
    assert training_args.learning_rate < stage_one_training.learning_rate
    # Both stages write the self-checking style; slips teach the check, not the slip or the reaction to it.
    for stage in (stage_one, data_args):
        assert stage.checks and stage.mask_slips and stage.mask_reactions and stage.slip_rate > 0


@pytest.mark.slow
def test_stage_two_continues_a_checkpoint_with_its_tokenizer(tmp_path):
    from recovery.toy.model import load_tiny_reasoner
    from recovery.toy.train import main, make_parser

    tiny = ["--hidden_size", "32", "--num_hidden_layers", "1", "--intermediate_size", "64"]
    common = [
        "--max_steps",
        "2",
        "--num_train_problems",
        "64",
        "--per_device_train_batch_size",
        "8",
        "--num_eval_problems",
        "0",
        "--logging_steps",
        "1",
        "--disable_tqdm",
        "true",
    ]
    main(*parse("--output_dir", str(tmp_path / "one"), "--tokenizer_traces", "64", *tiny, *common))
    first, _ = load_tiny_reasoner(tmp_path / "one")
    args = make_parser().parse_args_and_config(
        args=[
            "--config",
            str(STAGE_TWO),
            "--init_from",
            str(tmp_path / "one"),
            "--output_dir",
            str(tmp_path / "two"),
            "--mask_slips",
            "true",
            "--export_dir",
            str(tmp_path / "ckpt"),
            *common,
        ]
    )
    metrics = main(*args)
    assert metrics["train_steps"] == 2 and metrics["data_args"]["init_from"] == str(tmp_path / "one")
    second, tok = load_tiny_reasoner(tmp_path / "ckpt")
    assert second.config.hidden_size == 32  # the stage-1 shape, not the (ignored) default shape
    assert tok.get_vocab() == load_tiny_reasoner(tmp_path / "one")[1].get_vocab()
    changed = [n for n, p in second.named_parameters() if not p.detach().equal(dict(first.named_parameters())[n])]
    assert changed  # trained on from the stage-1 weights
    card = (tmp_path / "ckpt" / "README.md").read_text()
    assert "Stage 2 continued" in card and "no loss on their wrong step" in card
    assert "`Check: 12 - 3 = 9.`" in card and "left to recovery training" in card
