"""W&B, offline: the callback in a real `trl.SFTTrainer` run writes its scalars and per-step curves, and a
benchmark run directory is logged by `log_run_to_wandb`. Both are read back from the offline ``.wandb``
transaction log (`recovery.training.wandb_logging.read_offline_run`)."""

from __future__ import annotations

import pytest

wandb = pytest.importorskip("wandb")

from recovery.training.callback import RobustnessCallback, RobustnessCallbackConfig
from recovery.training.wandb_logging import log_run_to_wandb, offline_runs, read_offline_run

INTERVENTIONS = ["toy/wrong_continuation", "toy/random_characters"]


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "recovery-tests")
    wandb.teardown()  # wandb keeps its settings process-wide: start from this test's environment
    yield tmp_path
    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()


def test_callback_in_sft_run_writes_scalars_and_one_curve_per_step(offline_wandb, tmp_path, toy_tokenizer, tiny_model):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from recovery.toy.dataset import sft_records, training_traces

    data = Dataset.from_list(sft_records(training_traces(36, seed=3), toy_tokenizer))
    args = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=4, per_device_train_batch_size=4, learning_rate=5e-3,
        eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=4, logging_steps=1, save_strategy="no",
        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=["wandb"], run_name="callback-test",
    )  # fmt: skip
    trainer = SFTTrainer(model=tiny_model, args=args, train_dataset=data.select(range(32)),
                         eval_dataset=data.select(range(32, 36)), processing_class=toy_tokenizer)  # fmt: skip
    config = RobustnessCallbackConfig(n_problems=2, interventions=INTERVENTIONS, timesteps=[0.3, 0.7], n_samples=2,
                                      max_new_tokens=24, spec="tiny-reasoner", raise_errors=True)  # fmt: skip
    callback = RobustnessCallback(config).attach(trainer)
    trainer.train()
    wandb.finish()
    assert [step for step, _ in callback.results] == [2, 4]

    (run_dir,) = offline_runs(offline_wandb)
    run = read_offline_run(run_dir)
    assert run.complete
    # Scalars went through Trainer.log → WandbCallback (which prefixes train/), at each eval step.
    scalar_rows = {row["train/global_step"]: row for row in run.history if "train/robustness/mean/majority" in row}
    assert sorted(scalar_rows) == [2, 4]
    for row in scalar_rows.values():
        for iv in ("toy_wrong_continuation", "toy_random_characters"):
            for key in ("majority", "at_least_once", "all", "length_overhead_pct", "doubt_rate", "majority_t0.3"):
                assert f"train/robustness/{iv}/{key}" in row
        assert "train/robustness/clean_accuracy" in row and row["train/robustness/n_chains"] == 8
    # One curve and one table per evaluation step, under their own keys (nothing overwritten).
    tables = {}
    for step in (2, 4):
        rows = [r for r in run.history if f"robustness/table_step_{step}/path" in r]
        assert len(rows) == 1 and rows[0]["train/global_step"] == step
        assert f"robustness/curve_step_{step}_table/path" in rows[0]  # the line_series chart's table
        table = run.table(rows[0], f"robustness/table_step_{step}")
        curve = run.table(rows[0], f"robustness/curve_step_{step}_table")
        assert {row[0] for row in table["data"]} == {step}
        assert len(table["data"]) == 4 and set(curve["columns"]) >= {"lineKey", "lineVal", "step"}
        tables[step] = table
    assert not {"robustness/table", "robustness/curve"} & run.keys()
    # The curves describe different models: the weights moved between the two evaluations.
    cols = tables[2]["columns"]
    metrics = [cols.index(c) for c in ("length_overhead_pct", "majority")]
    assert [[r[i] for i in metrics] for r in tables[2]["data"]] != [[r[i] for i in metrics] for r in tables[4]["data"]]
    # The callback's numbers are those logged.
    step4 = dict(callback.results)[4]
    logged = {(r[cols.index("intervention")], r[cols.index("timestep")]): r[cols.index("length_overhead_pct")]
              for r in tables[4]["data"]}  # fmt: skip
    assert logged == pytest.approx(
        {(r["intervention"], r["timestep"]): r["length_overhead_pct"] for r in step4.per_timestep}
    )


def test_log_run_to_wandb(offline_wandb, toy_run):
    from recovery.pipeline.config import WandbConfig

    config = WandbConfig(project="recovery-tests", run_name="toy-bench", tags=["test"])
    path = log_run_to_wandb(toy_run.path, config, dir=offline_wandb)
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
    assert run.config.get("run_dir") == str(toy_run.path)  # the run's manifest is the W&B config


def problem_domain(toy_run) -> str:
    (domain,) = {p.domain for p in toy_run.problems}
    return domain
