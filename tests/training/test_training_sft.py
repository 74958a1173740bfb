"""`recovery.training.sft.main` end to end from the tiny-reasoner recipe (a tiny random Llama stands in for the
checkpoint): SFT recovery traces built from a run directory, a real `trl.SFTTrainer` run with the
callback, and the collated batch's labels covering only the recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.training.commands import parse

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "tiny-reasoner" / "sft_recovery" / "config.yaml"


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, tiny_model_dir, toy_run):
    from recovery.training.sft import main

    out = tmp_path_factory.mktemp("sft")
    script_args, training_args, model_args = parse(
        "sft",
        [
            "--config",
            str(RECIPE),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--run_dir",
            str(toy_run.path),
            "--output_dir",
            str(out / "model"),
            "--save_dataset_to",
            str(out / "dataset"),
            "--max_steps",
            "3",
            "--per_device_train_batch_size",
            "4",
            "--logging_steps",
            "1",
            "--report_to",
            "none",
            "--robustness_problems",
            "2",
            "--robustness_samples",
            "2",
            "--robustness_max_new_tokens",
            "12",
            "--robustness_timesteps",
            "0.5",
            "--robustness_every_k_steps",
            "2",
        ],
    )
    assert script_args.teacher == "toy" and script_args.sft_sources == ["own", "teacher"]  # from the recipe
    trainer = main(script_args, training_args, model_args)
    return trainer, out


def test_sft_main_trains_with_the_callback_and_saves(sft_run):
    from datasets import load_from_disk

    trainer, out = sft_run
    assert trainer.state.global_step == 3
    steps = [row["step"] for row in trainer.state.log_history if "robustness/mean/majority" in row]
    assert steps == [0, 2]  # at_train_begin (recipe) and every 2 steps
    assert (out / "model" / "model.safetensors").is_file() and (out / "model" / "tokenizer.json").is_file()
    dataset = load_from_disk(str(out / "dataset"))
    assert {"prompt", "completion", "origin", "kind"} <= set(dataset.column_names)
    # The run's own continuations are the toy teacher's resuming recoveries; the recipe's teacher restarts the
    # chain after its doubt, so its rows are new texts rather than duplicates of the run's own.
    assert set(dataset["origin"]) == {"own", "teacher", "clean"} and set(dataset["kind"]) == {"recovery", "clean"}


def test_collated_labels_cover_only_the_recovery(sft_run, toy_run):
    from datasets import load_from_disk

    trainer, out = sft_run
    tokenizer = trainer.processing_class
    rows: dict[str, list[dict]] = {}
    for r in load_from_disk(str(out / "dataset")):  # clean cuts of one trace share prompt + completion
        rows.setdefault(r["prompt"] + r["completion"], []).append(r)
    prefixes = {c.id: c.prefix for c in toy_run.chains}
    batch = next(iter(trainer.get_train_dataloader()))
    seen = 0
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True):
        trained = [i for i, label in enumerate(labels) if label != -100]
        assert trained == list(range(trained[0], trained[-1] + 1))  # one contiguous span at the end
        assert all(labels[i] == ids[i] for i in trained)
        end = trained[-1] + 1
        text = tokenizer.decode(ids[:end])
        assert text.endswith(tokenizer.eos_token)
        # The untrained part is exactly a row's prompt — the intervened prefix included — and the trained
        # part exactly its completion (+ EOS).
        (row,) = [
            r
            for r in rows[text[: -len(tokenizer.eos_token)]]
            if len(tokenizer(text=r["prompt"])["input_ids"]) == trained[0]
        ]
        assert tokenizer.decode(ids[: trained[0]]) == row["prompt"]
        assert tokenizer.decode([ids[i] for i in trained]) == row["completion"] + tokenizer.eos_token
        if row["kind"] == "recovery":
            assert row["prompt"].endswith(prefixes[row["chain_id"]])
        seen += 1
    assert seen == 4


def test_the_recipes_toy_teacher_restarts_the_chain_after_its_doubt():
    from recovery.training.sft import make_teacher

    script_args, _, _ = parse("sft", ["--config", str(RECIPE)])
    assert make_teacher(script_args).restart  # the demo's choice, carried by the recipe
    script_args, _, _ = parse("sft", ["--config", str(RECIPE), "--toy_teacher_restart", "false"])
    assert not make_teacher(script_args).restart
