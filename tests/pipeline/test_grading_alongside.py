"""Grading alongside generation: the same grades as the grades stage, nothing left for it, safe on failure.

Generation is the boundary here: a scripted generator writes the toy teacher's recovery (correct), the same
with another answer (wrong) and a text that never closes its reasoning, for every chain. Everything else —
interventions, worker processes, shards, the grades stage — is the real pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.configs import to_mapping
from recovery.generation import GenerationResult, Sample
from recovery.pipeline import (
    DatasetConfig,
    GradingConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    run_pipeline,
)
from recovery.run_dir import records
from recovery.store import RunDir

MODEL = "tiny-reasoner"


class TeacherGenerator:
    """Per request: the toy teacher's continuation, a wrong-answer copy and an unclosed one (n = 3)."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "scripted-teacher"

    def generate(self, requests):
        from recovery.toy import recovery_continuation
        from recovery.toy.tasks import make_problem, parse_question

        for request in requests:
            problem = make_problem(parse_question(request.messages[0].content))
            good = recovery_continuation(problem, request.prefill).text
            head, _, tail = good.rpartition("\\boxed{")
            wrong = head + "\\boxed{999" + tail[tail.index("}") :]
            samples = (
                Sample(good, 40, "stop"),
                Sample(wrong, 40, "stop"),
                Sample("\n\nStep A: still thinking", 9, "length"),
            )
            yield GenerationResult(
                request.request_id, samples[: request.sampling.n], prompt_tokens=50, prefilled_tokens=50
            )

    def close(self) -> None:
        pass


def _seeded_run(path: Path, *, alongside: bool, cpu_workers: int = 2) -> RunConfig:
    """Toy problems, their traces (all kept) and a config for chains → continuations → grades."""
    from recovery.toy import generate_problems, write_trace

    config = RunConfig(
        run_dir=str(path),
        dataset=DatasetConfig(name="toy", limit=12),
        models=[ModelConfig(name=MODEL)],
        interventions=InterventionsConfig(
            names=["toy/wrong_continuation", "toy/random_characters"], timesteps=[0.3, 0.7]
        ),
        continuation=SamplingConfig(n=3),
        grading=GradingConfig(alongside=alongside),
        cpu_workers=cpu_workers,
        flush_every=8,  # several committed batches, so several grading chunks
    )
    run = RunDir(path)
    run.path.mkdir(parents=True)
    run.file("config.json").write_text(json.dumps(to_mapping(config), indent=2, sort_keys=True, default=str))
    problems = generate_problems(12, seed=0)
    traces = [write_trace(p, slip_rate=0.0).as_trace(MODEL) for p in problems]
    with run.table("problems").writer(records.PROBLEMS) as w:
        w.add_many(records.problem_row(p) for p in problems)
    with run.table("traces").writer(records.TRACES) as w:
        w.add_many(records.trace_row(t) for t in traces)
    with run.table("kept").writer(records.KEPT) as w:
        w.add_many(
            {"id": t.id, "model": MODEL, "problem_id": t.problem_id, "kept": True, "reason": "kept"} for t in traces
        )
    return config


def _run(config: RunConfig):
    return run_pipeline(
        config,
        stages=["chains", "continuations", "grades"],
        make_generator=lambda _m: TeacherGenerator(),
        progress=False,
    )


def _grades(path: Path) -> list[dict]:
    return sorted(RunDir(path).table("grades").iter_rows(), key=lambda r: r["id"])


def test_grades_alongside_equal_the_grades_stage_and_leave_it_nothing(tmp_path):
    alongside = _seeded_run(tmp_path / "alongside", alongside=True)
    staged = _seeded_run(tmp_path / "staged", alongside=False)
    summary = _run(alongside)
    _run(staged)

    grades = _grades(tmp_path / "alongside")
    assert grades == _grades(tmp_path / "staged")
    n_continuations = RunDir(alongside.run_dir).table("continuations").count()
    assert len(grades) == n_continuations > 0
    assert {g["verdict"] for g in grades} == {"correct", "wrong", "no_answer"}
    shards = [p.name for p in RunDir(alongside.run_dir).table("grades").shards()]
    assert shards and all(name.startswith("part-i") for name in shards)  # written alongside, not by the stage
    # Graded alongside is graded: the summary says so, and an unclosed continuation is a no_answer grade,
    # not a skip.
    assert summary.written["grades"] == n_continuations
    assert summary.grades["no_answer"] == n_continuations // 3 and not summary.skips


def test_one_cpu_worker_leaves_grading_to_the_grades_stage(tmp_path):
    config = _seeded_run(tmp_path / "run", alongside=True, cpu_workers=1)
    summary = _run(config)
    shards = [p.name for p in RunDir(config.run_dir).table("grades").shards()]
    assert shards and not any(name.startswith("part-i") for name in shards)
    assert summary.written["grades"] == RunDir(config.run_dir).table("continuations").count()


def test_a_failing_grading_pool_never_stops_generation(tmp_path, monkeypatch):
    """When the background grading breaks (simulated: a broken process pool cannot be provoked on cue),
    generation finishes, the failure is counted and the grades stage grades everything; nothing is lost."""
    from recovery.pipeline import grading_alongside

    config = _seeded_run(tmp_path / "run", alongside=True)

    def failing_drain(self):
        self.failed = RuntimeError("worker pool broke")
        for _ in self._chunks():
            pass

    monkeypatch.setattr(grading_alongside.GradingAlongside, "_drain", failing_drain)
    summary = _run(config)
    n_continuations = RunDir(config.run_dir).table("continuations").count()
    assert n_continuations == 12 * 2 * 2 * 3
    assert summary.skips.get("grades/grading_alongside_failed") == 1
    assert summary.written["grades"] == n_continuations == len(_grades(tmp_path / "run"))


def test_grading_alongside_is_configurable_from_yaml(tmp_path):
    from recovery.configs import from_mapping, load_yaml

    path = tmp_path / "run.yaml"
    path.write_text(f"run_dir: {tmp_path}/r\ndataset: {{name: toy}}\ngrading: {{alongside: false}}\n")
    assert from_mapping(RunConfig, load_yaml(path)).grading.alongside is False
    path.write_text(f"run_dir: {tmp_path}/r\ndataset: {{name: toy}}\ngrading: {{alongside: 'sometimes'}}\n")
    with pytest.raises(Exception, match="alongside"):
        from_mapping(RunConfig, load_yaml(path))
