"""A run graded by another version of the rule grader is graded again from its stored continuations, on the
real grades stage of a real toy run directory (`toy_runs`): nothing is generated again, and the run records
which grader version made its grades."""

from __future__ import annotations

import hashlib
import json
import shutil

from recovery.grading import GRADER_VERSION
from recovery.pipeline import DatasetConfig, InterventionsConfig, ModelConfig, RunConfig, run_pipeline
from recovery.pipeline.grader_version import GRADER_FILE, UNRECORDED, stored_grader_version
from recovery.run_dir import open_run, records
from recovery.store import RunDir
from toy_runs import MODEL, ToyRunSpec

SPEC = ToyRunSpec(interventions=("toy/wrong_continuation",), timesteps=(0.5,), n_problems=3)


def _config(run_dir) -> RunConfig:
    return RunConfig(
        run_dir=str(run_dir),
        dataset=DatasetConfig(name="toy", limit=SPEC.n_problems),
        models=[ModelConfig(name=MODEL)],
        interventions=InterventionsConfig(names=list(SPEC.interventions), timesteps=list(SPEC.timesteps)),
        cpu_workers=1,
    )


def _verdicts(run_dir) -> dict[str, str]:
    return {row["id"]: row["verdict"] for row in RunDir(run_dir).table("grades").iter_rows(["id", "verdict"])}


def _digest(folder) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.parquet")))).hexdigest()


def test_grades_of_another_grader_version_are_made_again_without_generating(toy_run_for, tmp_path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(toy_run_for(SPEC).path, run_dir)
    (run_dir / "config.json").unlink()
    shutil.rmtree(run_dir / "grades")
    config = _config(run_dir)
    run_pipeline(config, stages=["grades"], progress=False)
    current = _verdicts(run_dir)
    assert {"correct", "wrong"} <= set(current.values())
    assert stored_grader_version(open_run(run_dir)) == GRADER_VERSION

    # The grades an older grader made: every verdict the other way, and no version recorded.
    table = RunDir(run_dir).table("grades")
    rows = list(table.iter_rows())
    shutil.rmtree(run_dir / "grades")
    flipped = [{**row, "verdict": "wrong" if row["verdict"] == "correct" else "correct"} for row in rows]
    with RunDir(run_dir).table("grades").writer(records.GRADES, writer_id="old") as writer:
        writer.add_many(flipped)
    assert stored_grader_version(open_run(run_dir)) == UNRECORDED
    continuations = _digest(run_dir / "continuations")

    run_pipeline(config, stages=["grades"], progress=False)
    assert _verdicts(run_dir) == current
    assert json.loads((run_dir / "grades" / GRADER_FILE).read_text()) == {"grader_version": GRADER_VERSION}
    assert _digest(run_dir / "continuations") == continuations  # nothing generated or rewritten
    assert not list(run_dir.glob(".grades-*"))  # the old grades left nothing behind

    graded = _digest(run_dir / "grades")
    run_pipeline(config, stages=["grades"], progress=False)  # the current version's grades stay as they are
    assert _digest(run_dir / "grades") == graded
