"""Worker-process map: order, in-process fallback, and worker-count-independent pipeline output."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from recovery.parallel import map_chunks

_STATE: dict = {}


def _init(offset: int) -> None:
    _STATE["offset"] = offset


def _work(chunk: list[int]) -> tuple[int, int]:
    return sum(chunk) + _STATE["offset"], os.getpid()


def test_results_come_back_in_input_order_from_several_processes():
    chunks = [[i] * (50 - i) for i in range(20)]  # uneven work, so workers finish out of order
    results = list(map_chunks(_work, iter(chunks), workers=2, initializer=_init, initargs=(7,)))
    assert [r[0] for r in results] == [sum(c) + 7 for c in chunks]
    assert os.getpid() not in {pid for _, pid in results}


def test_one_worker_runs_in_this_process():
    results = list(map_chunks(_work, [[1, 2], [3]], workers=1, initializer=_init, initargs=(0,)))
    assert results == [(3, os.getpid()), (3, os.getpid())]


def _run_chains(tmp: Path, shared_data, workers: int, traces) -> list[str]:
    from recovery.pipeline import DatasetConfig, InterventionsConfig, ModelConfig, RunConfig, run_pipeline
    from recovery.run_dir import records
    from recovery.store import RunDir

    run = RunDir(tmp)
    with (
        run.table("problems").writer(records.PROBLEMS) as pw,
        run.table("traces").writer(records.TRACES) as tw,
        run.table("kept").writer(records.KEPT) as kw,
    ):
        for problem, trace in traces:
            pw.add(records.problem_row(problem))
            tw.add(records.trace_row(trace))
            kw.add({"id": trace.id, "model": "m", "problem_id": problem.id, "kept": True, "reason": "kept"})
    pool = shared_data / "wikipedia_paragraphs" / "wikitext2_test_paragraphs.jsonl"
    config = RunConfig(
        run_dir=str(tmp),
        dataset=DatasetConfig(name="synthetic"),
        models=[ModelConfig(name="m")],
        interventions=InterventionsConfig(
            names=["random_characters", "wikipedia_text"], timesteps=[0.1, 0.5, 0.9], wikipedia_pool=str(pool)
        ),
        cpu_workers=workers,
    )
    run_pipeline(config, stages=["chains"], progress=False)
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in run.table("chains").shards()]


def test_chains_are_byte_identical_for_any_worker_count(tmp_path, shared_data):
    from recovery.segment import parse_trace
    from recovery.types import Problem

    traces = []
    for i in range(300):  # more than one chunk of traces
        problem = Problem("math", f"What is {i} + 1?", str(i + 1), "numeric", "test")
        steps = "\n\n".join(f"Step {k}: add {k} to the total {i}." for k in range(3 + i % 7))
        traces.append((problem, parse_trace(problem.id, "m", f"<think>{steps}</think>\\boxed{{{i + 1}}}")))
    one = _run_chains(tmp_path / "one", shared_data, 1, traces)
    two = _run_chains(tmp_path / "two", shared_data, 2, traces)
    assert len(one) >= 2 and one == two


@pytest.fixture
def shared_data(shared_data):  # noqa: F811 — narrow the shared fixture to what this file reads
    return shared_data
