"""W&B, offline: the callback in a real `trl.SFTTrainer` run and the SFT and GRPO recipes put the settings
that tell runs apart into the run config and log one key per quantity over the steps; a benchmark run
directory is logged by `log_run_to_wandb` with its protocol in the config. Everything is read back from the
offline ``.wandb`` transaction log (`wandb_offline.read_offline_run`, beside these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

wandb = pytest.importorskip("wandb")

from wandb_offline import offline_runs, read_offline_run  # tests/training/wandb_offline.py

from recovery.run_config import InterventionsConfig, SamplingConfig
from recovery.training.callback import RobustnessCallback, RobustnessCallbackConfig
from recovery.training.wandb_benchmark import log_run_to_wandb
from recovery.training.wandb_logging import update_run_config

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

INTERVENTIONS = ["toy/wrong_continuation", "toy/random_characters"]


def test_callback_in_sft_run_logs_one_key_per_quantity_and_its_settings(
    offline_wandb, tmp_path, toy_tokenizer, tiny_model
):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from recovery.toy.dataset import sft_records, training_traces

    data = Dataset.from_list(sft_records(training_traces(36, seed=3), toy_tokenizer))
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=4,
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=["wandb"],
        run_name="callback-test",
    )
    trainer = SFTTrainer(
        model=tiny_model,
        args=args,
        train_dataset=data.select(range(32)),
        eval_dataset=data.select(range(32, 36)),
        processing_class=toy_tokenizer,
    )
    config = RobustnessCallbackConfig(
        n_problems=2,
        interventions=InterventionsConfig(names=INTERVENTIONS, timesteps=[0.3, 0.7]),
        continuation=SamplingConfig(n=2, max_new_tokens=24),
        spec="tiny-reasoner",
        raise_errors=True,
    )
    callback = RobustnessCallback(config, run_config={"clean_fraction": 0.25}).attach(trainer)
    trainer.train()
    wandb.finish()
    assert [step for step, _ in callback.results] == [2, 4]

    (run_dir,) = offline_runs(offline_wandb)
    run = read_offline_run(run_dir)
    assert run.complete
    # The run config: the benchmark as measured and the run_config given, beside WandbCallback's own keys.
    assert run.config["robustness/interventions"] == sorted(INTERVENTIONS)
    assert run.config["robustness/timesteps"] == [0.3, 0.7]
    assert run.config["robustness/continuation.n"] == 2 and run.config["robustness/n_problems"] == 2
    assert run.config["robustness/problems"] == sorted(p.id for p in callback.eval_problems)
    assert run.config["robustness/n_chains"] == 8 and run.config["robustness/source"] == "toy"
    assert run.config["robustness/continuation.temperature"] == 0.6
    assert run.config["robustness/continuation.max_new_tokens"] == 24
    assert run.config["robustness/grading.unclosed"] == "no_answer"
    assert not {"robustness/prefix", "robustness/raise_errors"} & set(run.config)
    assert run.config["clean_fraction"] == 0.25
    assert run.config["learning_rate"] == 5e-3 and run.config["run_name"] == "callback-test"  # WandbCallback's
    assert run.config["hidden_size"] == 32  # the model config, also WandbCallback's
    # Scalars went through Trainer.log → WandbCallback (which prefixes train/): the same keys at each eval step.
    scalar_rows = {row["train/global_step"]: row for row in run.history if "train/robustness/mean/majority" in row}
    assert sorted(scalar_rows) == [2, 4]
    for row in scalar_rows.values():
        for iv in ("toy_wrong_continuation", "toy_random_characters", "mean"):
            for key in (
                "majority",
                "at_least_once",
                "all",
                "length_overhead_pct",
                "doubt_rate",
                "majority_t0.3",
                "majority_t0.7",
            ):
                assert f"train/robustness/{iv}/{key}" in row
        assert "train/robustness/clean_accuracy" in row and row["train/robustness/n_chains"] == 8
    # The curve and table of each checkpoint under one key each, logged at its global step.
    assert not [k for k in run.keys() if "curve_step_" in k or "table_step_" in k]
    rows = [r for r in run.history if "robustness/table/path" in r]
    assert [r["train/global_step"] for r in rows] == [2, 4]
    tables = {}
    for row in rows:
        step = row["train/global_step"]
        assert "robustness/curve_table/path" in row  # the line_series chart's table
        table = run.table(row, "robustness/table")
        curve = run.table(row, "robustness/curve_table")
        assert {r[0] for r in table["data"]} == {step}
        assert len(table["data"]) == 4 and set(curve["columns"]) >= {"lineKey", "lineVal", "step"}
        assert {r[curve["columns"].index("lineKey")] for r in curve["data"]} == set(INTERVENTIONS)
        tables[step] = table
    # What the model wrote: a sample of each evaluation's continuations, added to one incremental table.
    samples = [r for r in run.history if "robustness/samples/path" in r]
    assert [r["train/global_step"] for r in samples] == [2, 4]
    written = [row for r in samples for row in run.table(r, "robustness/samples")["data"]]
    columns = run.table(samples[0], "robustness/samples")["columns"]
    assert columns == ["step", "chain", "intervention", "t", "continuation", "verdict", "doubt"]
    assert {row[2] for row in written} == {*INTERVENTIONS, "clean"} and all(row[4] for row in written)
    assert {row[5] for row in written} <= {"correct", "wrong", "no_answer", "timeout", "error"}
    # The curves describe different models: the weights moved between the two evaluations.
    cols = tables[2]["columns"]
    metrics = [cols.index(c) for c in ("length_overhead_pct", "majority")]
    assert [[r[i] for i in metrics] for r in tables[2]["data"]] != [[r[i] for i in metrics] for r in tables[4]["data"]]
    # The callback's numbers are those logged.
    step4 = dict(callback.results)[4]
    logged = {
        (r[cols.index("intervention")], r[cols.index("timestep")]): r[cols.index("length_overhead_pct")]
        for r in tables[4]["data"]
    }
    assert logged == pytest.approx(
        {(r["intervention"], r["timestep"]): r["length_overhead_pct"] for r in step4.per_timestep}
    )
    pooled = [r for r in step4.per_timestep if r["timestep"] == 0.3]
    assert scalar_rows[4]["train/robustness/mean/majority_t0.3"] == pytest.approx(
        sum(r["majority"] * r["n_chains"] for r in pooled) / sum(r["n_chains"] for r in pooled)
    )


SFT_RECIPE = RECIPES / "tiny-reasoner" / "sft_recovery" / "config.yaml"
GRPO_RECIPE = RECIPES / "tiny-reasoner" / "grpo_recovery" / "config.yaml"
SMALL_CALLBACK = [
    "--robustness_problems",
    "2",
    "--robustness_samples",
    "2",
    "--robustness_max_new_tokens",
    "12",
    "--robustness_timesteps",
    "0.5",
]


def test_sft_recipe_run_config_holds_the_recipe_and_the_benchmark(offline_wandb, tmp_path, tiny_model_dir, toy_run):
    from recovery.training.commands import parse
    from recovery.training.sft import main

    script_args, training_args, model_args = parse(
        "sft",
        [
            "--config",
            str(SFT_RECIPE),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--run_dir",
            str(toy_run.path),
            "--output_dir",
            str(tmp_path / "model"),
            "--save_dataset_to",
            str(tmp_path / "dataset"),
            "--max_steps",
            "3",
            "--per_device_train_batch_size",
            "4",
            "--logging_steps",
            "1",
            "--report_to",
            "wandb",
            "--robustness_every_k_steps",
            "2",
            "--clean_fraction",
            "0.6",
            *SMALL_CALLBACK,
        ],
    )
    main(script_args, training_args, model_args)  # finishes the W&B run

    (run_dir,) = offline_runs(offline_wandb)
    run = read_offline_run(run_dir)
    config = run.config
    # The recipe's script arguments, as written there or overridden on the command line.
    assert config["clean_fraction"] == 0.6 and config["sft_sources"] == ["own", "teacher"]
    assert config["teacher"] == "toy" and config["toy_teacher_restart"] is True
    assert config["max_overhead_pct"] == 100.0 and config["require_doubt"] is False
    assert config["run_dir"] == str(toy_run.path) and config["decontaminate_toy_heldout"] == 200
    assert config["robustness_problems"] == 2 and config["robustness_timesteps"] == [0.5]
    assert config["robustness_interventions"] == [
        "toy/wrong_continuation",
        "toy/random_characters",
        "toy/unrelated_cot",
    ]
    # The mini-benchmark as measured.
    assert config["robustness/interventions"] == sorted(config["robustness_interventions"])
    assert config["robustness/timesteps"] == [0.5] and config["robustness/continuation.n"] == 2
    assert len(config["robustness/problems"]) == 2 and config["robustness/every_k_steps"] == 2
    # WandbCallback's training arguments are still there.
    assert config["max_steps"] == 3 and config["learning_rate"] == training_args.learning_rate
    # One key over the steps: the evaluation at the start and after step 2.
    steps = [r["train/global_step"] for r in run.history if "train/robustness/mean/majority" in r]
    assert steps == [0, 2]
    assert [r["train/global_step"] for r in run.history if "robustness/table/path" in r] == [0, 2]
    assert not [k for k in run.keys() if "curve_step_" in k]
    # The benchmark run the data was built from, as the run's input (offline: recorded in the config).
    (used,) = config["benchmark_runs"]
    assert used["path"] == str(toy_run.path.resolve()) and used["artifact"] == f"benchmark-{toy_run.path.name}"


def test_grpo_recipe_run_config_holds_the_rewards(offline_wandb, tmp_path, tiny_model_dir, toy_run):
    from recovery.training.commands import parse
    from recovery.training.grpo import main

    script_args, training_args, model_args = parse(
        "grpo",
        [
            "--config",
            str(GRPO_RECIPE),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--run_dir",
            str(toy_run.path),
            "--output_dir",
            str(tmp_path / "model"),
            "--max_steps",
            "1",
            "--per_device_train_batch_size",
            "4",
            "--num_generations",
            "2",
            "--max_completion_length",
            "16",
            "--logging_steps",
            "1",
            "--report_to",
            "wandb",
            "--warmup_steps",
            "0",
            "--reward_funcs",
            "correctness",
            "doubt",
            "length",
            "--reward_weights",
            "1.0",
            "0.2",
            "0.3",
            "--length_max_overhead",
            "0.5",
            "--robustness_every_k_steps",
            "1",
            "--robustness_at_train_begin",
            "false",
            *SMALL_CALLBACK,
        ],
    )
    main(script_args, training_args, model_args)

    (run_dir,) = offline_runs(offline_wandb)
    config = read_offline_run(run_dir).config
    assert config["reward_funcs"] == ["correctness", "doubt", "length"]
    assert config["reward_weights"] == [1.0, 0.2, 0.3]  # a GRPOConfig field: WandbCallback's
    recipe = yaml.safe_load(GRPO_RECIPE.read_text())
    assert config["clean_fraction"] == recipe["clean_fraction"] and config["recovery_weights"] == [1.0, 0.2, 0.3]
    assert config["length_max_overhead"] == 0.5 and config["length_unit"] == "chars"
    assert config["doubt_only_intervened"] is True and config["beta"] == training_args.beta
    assert config["robustness/timesteps"] == [0.5] and config["robustness/every_k_steps"] == 1


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_recipe_run_config_without_the_callback(stage, offline_wandb, tmp_path, tiny_model_dir, toy_run):
    """``robustness: false``: no RobustnessCallback, and the recipe's script arguments still reach the W&B
    run config (beside WandbCallback's training arguments)."""
    from recovery.training.commands import parse
    from recovery.training.grpo import main as grpo_main
    from recovery.training.sft import main as sft_main
    from recovery.training.stage import RecipeConfigCallback

    recipe = SFT_RECIPE if stage == "sft" else GRPO_RECIPE
    extra = ["--num_generations", "2", "--max_completion_length", "8", "--warmup_steps", "0"] if stage == "grpo" else []
    if stage == "sft":  # the recipe saves the dataset under runs/ of the working directory: keep the checkout clean
        extra = ["--save_dataset_to", str(tmp_path / "dataset")]
    script_args, training_args, model_args = parse(
        stage,
        [
            "--config",
            str(recipe),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--run_dir",
            str(toy_run.path),
            "--output_dir",
            str(tmp_path / "model"),
            "--max_steps",
            "1",
            "--per_device_train_batch_size",
            "4",
            "--report_to",
            "wandb",
            "--robustness",
            "false",
            "--clean_fraction",
            "0.4",
            *extra,
        ],
    )
    trainer = (sft_main if stage == "sft" else grpo_main)(script_args, training_args, model_args)
    assert not [c for c in trainer.callback_handler.callbacks if isinstance(c, RobustnessCallback)]

    (run_dir,) = offline_runs(offline_wandb)
    config = read_offline_run(run_dir).config
    assert config["robustness"] is False and config["clean_fraction"] == 0.4
    assert config["run_dir"] == str(toy_run.path) and config["decontaminate_toy_heldout"] == 200
    if stage == "sft":
        assert config["teacher"] == "toy" and config["sft_sources"] == ["own", "teacher"]
    else:
        assert config["reward_funcs"] == ["recovery"] and config["recovery_weights"] == [1.0, 0.2, 0.3]
    assert not [k for k in config if k.startswith("robustness/")]  # no benchmark ran
    assert config["max_steps"] == 1  # WandbCallback's training arguments are still there
    assert [c for c in trainer.callback_handler.callbacks if isinstance(c, RecipeConfigCallback)]


def test_update_run_config_adds_and_keeps_what_others_set(offline_wandb, caplog):
    wb = wandb.init(project="recovery-tests", config={"learning_rate": 0.1, "robustness/n_samples": 4})
    written = update_run_config(
        {"learning_rate": 0.5, "clean_fraction": (0.25,), "robustness/n_samples": 2, "robustness/seed": 0},
        owned="robustness/",
    )
    assert written == {"clean_fraction": [0.25], "robustness/n_samples": 2, "robustness/seed": 0}
    assert "learning_rate" in caplog.text  # another's value is kept, and named
    assert update_run_config({"clean_fraction": [0.25]}) == {}  # the same value again: nothing to write
    path = wb.dir
    wb.finish()
    config = read_offline_run(Path(path).parent).config
    assert config["learning_rate"] == 0.1 and config["clean_fraction"] == [0.25]
    assert config["robustness/n_samples"] == 2 and config["robustness/seed"] == 0


def test_log_run_to_wandb(offline_wandb, tmp_path, toy_run, capfd, monkeypatch):
    import json
    import shutil

    from recovery.run_config import GradingConfig
    from recovery.run_sections import WandbConfig

    bench = shutil.copytree(toy_run.path, tmp_path / "bench")
    manifest = json.loads((bench / "config.json").read_text())
    manifest["models"][0]["api_key"] = "sk-not-for-wandb"
    (bench / "config.json").write_text(json.dumps(manifest))
    config = WandbConfig(project="recovery-tests", run_name="toy-bench", tags=["test"])
    monkeypatch.delenv("WANDB_SILENT")  # as a user runs it
    wandb.teardown()
    capfd.readouterr()
    path = log_run_to_wandb(bench, config, dir=offline_wandb)
    printed = capfd.readouterr()
    assert "Tracking run with wandb" not in printed.out + printed.err  # W&B's banners are the caller's to print
    (run_dir,) = offline_runs(offline_wandb)
    assert str(run_dir) == path
    run = read_offline_run(run_dir)
    assert run.complete
    (row,) = [r for r in run.history if "aggregates/path" in r]
    aggregates = run.table(row, "aggregates")
    assert len(aggregates["data"]) == 2 * 2  # two interventions × two timesteps, one model, one domain
    keys = {k.rsplit("_table/", 1)[0] for k in row if "_table/" in k}
    assert {k for k in keys if k.startswith("curves/")} == {
        f"curves/tiny-reasoner/{problem_domain(toy_run)}/{level}" for level in ("at_least_once", "majority", "all")
    }
    assert "clean_accuracy/path" in row
    # Sample 0 of every chain is the teacher's correct recovery, sample 1 is wrong: K = 1 of N = 2.
    summary = {k: v for k, v in run.summary.items() if k.endswith(("/at_least_once", "/all"))}
    assert summary and all(v == (1.0 if k.endswith("at_least_once") else 0.0) for k, v in summary.items())
    # The config: the run's manifest as written (API keys left out) and flat keys to compare runs by.
    assert run.config["run_dir"] == str(toy_run.path)
    assert run.config["interventions"]["names"] == ["toy/wrong_continuation", "toy/random_characters"]
    assert run.config["bench/interventions"] == ["toy/wrong_continuation", "toy/random_characters"]
    assert run.config["bench/timesteps"] == [0.3, 0.7] and run.config["bench/models"] == ["tiny-reasoner"]
    assert run.config["bench/n_samples"] == manifest["continuation"]["n"]
    assert run.config["bench/temperature"] == manifest["continuation"]["temperature"]
    assert run.config["bench/max_new_tokens"] == manifest["continuation"]["max_new_tokens"]
    assert run.config["bench/grading_protocol"] == GradingConfig().protocol()
    assert run.config["bench/unclosed"] == "no_answer" and run.config["bench/judge"] is None
    assert "api_key" not in run.config["models"][0]
    assert not [f for f in run_dir.rglob("*") if f.is_file() and b"sk-not-for-wandb" in f.read_bytes()]


def problem_domain(toy_run) -> str:
    (domain,) = {p.domain for p in toy_run.problems}
    return domain
