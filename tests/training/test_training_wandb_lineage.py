"""W&B as its users expect, offline: each evaluation adds a sample of what the model wrote to one incremental
table; a benchmark run directory is logged as an artifact, and a training run built from it declares that
artifact (the same files, the same digest) its input. Read back from the offline transaction log."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

wandb = pytest.importorskip("wandb")

from wandb_offline import iter_records, read_offline_run  # tests/training/wandb_offline.py

from recovery.training.wandb_benchmark import ARTIFACT_TYPE, log_run_to_wandb, run_artifact, use_benchmark_runs
from recovery.training.wandb_logging import SAMPLE_CHARS, SAMPLE_COLUMNS, log_samples, sample_rows


def records(n: int, intervention: str) -> list[dict]:
    return [
        {
            "chain": f"{intervention}-{i}",
            "intervention": intervention,
            "t": 0.5,
            "continuation": f"text {i}",
            "verdict": "correct",
            "doubt": "wait" if i % 2 else None,
        }
        for i in range(n)
    ]


def test_sample_rows_take_every_intervention_and_cut_long_texts():
    samples = records(10, "a") + records(2, "b") + [{**records(1, "c")[0], "continuation": "x" * 10_000}]
    rows = sample_rows(samples, 6, step=3)
    interventions = [r[SAMPLE_COLUMNS.index("intervention")] for r in rows]
    assert len(rows) == 6 and interventions.count("b") == 2 and interventions.count("c") == 1
    assert all(r[0] == 3 for r in rows) and sample_rows(samples, 6, step=3) == rows  # seeded by the step
    (long,) = [r[SAMPLE_COLUMNS.index("continuation")] for r in rows if r[2] == "c"]
    assert len(long) == SAMPLE_CHARS and long.endswith("…")
    assert len(sample_rows(samples, 100, step=0)) == len(samples)


def test_samples_table_grows_over_the_evaluations(offline_wandb):
    run = wandb.init(project="recovery-tests")
    table = None
    for step in (2, 4):
        result = SimpleNamespace(samples=records(3, "toy/wrong_continuation") + records(3, "clean"))
        table = log_samples(table, result, step, k=4, run=run)
    path = Path(run.dir).parent
    run.finish()
    logged = read_offline_run(path)
    rows = [r for r in logged.history if "robustness/samples/path" in r]
    assert [r["train/global_step"] for r in rows] == [2, 4]
    assert {r["robustness/samples/log_mode"] for r in rows} == {"INCREMENTAL"}
    assert [r["robustness/samples/increment_num"] for r in rows] == [0, 1]  # one table, two increments
    assert [r["robustness/samples/nrows"] for r in rows] == [4, 8]
    data = []
    for row in rows:
        increment = logged.table(row, "robustness/samples")
        assert increment["columns"] == list(SAMPLE_COLUMNS)
        data += increment["data"]
    assert [r[0] for r in data] == [2] * 4 + [4] * 4  # each evaluation's own rows, added to the table
    assert {r[2] for r in data} == {"toy/wrong_continuation", "clean"}


def test_a_log_caught_mid_write_reads_as_its_finished_records(offline_wandb, tmp_path):
    """The reader these tests use must not fail on a log the W&B service is still writing (it did once in CI)."""
    run = wandb.init(project="recovery-tests")
    for step in range(5):
        run.log({"x": "y" * 2000, "step": step})
    folder = Path(run.dir).parent
    run.finish()
    assert read_offline_run(folder).complete
    whole = next(folder.glob("run-*.wandb")).read_bytes()
    n_whole = len(list(iter_records(next(folder.glob("run-*.wandb")))))
    cut = tmp_path / "cut.wandb"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    n_cut = len(list(iter_records(cut)))
    assert 0 < n_cut < n_whole


def test_benchmark_artifact_is_the_input_of_the_training_run(offline_wandb, tmp_path, toy_run):
    import shutil

    bench = shutil.copytree(toy_run.path, tmp_path / "bench")
    manifest = json.loads((bench / "config.json").read_text())
    manifest["models"][0]["api_key"] = "sk-not-for-wandb"
    (bench / "config.json").write_text(json.dumps(manifest))
    (bench / ".lock").write_text("")
    path = Path(log_run_to_wandb(bench, dir=offline_wandb))
    assert read_offline_run(path).complete  # wandb.finish() may return before the log is flushed: wait for it
    (logged,) = [
        rec.artifact
        for rec in iter_records(next(path.glob("run-*.wandb")))
        if rec.WhichOneof("record_type") == "artifact" and rec.artifact.type == ARTIFACT_TYPE
    ]
    expected = run_artifact(bench)
    assert logged.name == expected.name == "benchmark-bench" and logged.digest == expected.digest
    files = {e.path for e in logged.manifest.contents}
    assert "config.json" in files and ".lock" not in files and any(f.startswith("chains/") for f in files)
    with open(expected.manifest.entries["config.json"].local_path, encoding="utf-8") as f:
        assert "sk-not-for-wandb" not in f.read()
    assert json.loads(logged.metadata)["bench/models"] == ["tiny-reasoner"]

    # A training run (online: W&B's use_artifact, faked at the run object; offline: recorded in the config).
    class OnlineRun:
        settings = SimpleNamespace(mode="online")
        used: list = []

        def use_artifact(self, artifact):
            self.used.append(artifact)

    online = OnlineRun()
    use_benchmark_runs([bench, tmp_path / "missing"], run=online)
    assert [(a.name, a.digest) for a in online.used] == [(logged.name, logged.digest)]
    run = wandb.init(project="recovery-tests", reinit="create_new")
    (used,) = use_benchmark_runs([bench], run=run)
    folder = Path(run.dir).parent
    run.finish()
    assert used["digest"] == logged.digest
    assert read_offline_run(folder).config["benchmark_runs"] == [used]
