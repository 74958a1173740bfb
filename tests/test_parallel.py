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


def test_threads_return_in_item_order_and_hold_a_bounded_window():
    import threading
    import time

    from recovery.parallel import map_threads

    pulled, active, most = [0], [0], [0]
    lock = threading.Lock()

    def items():
        for i in range(40):
            pulled[0] += 1
            yield i

    def slow_square(i: int) -> int:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.002 * (i % 5))  # uneven waits: threads finish out of order
        with lock:
            active[0] -= 1
        return i * i

    results = []
    for r in map_threads(slow_square, items(), width=4):
        results.append(r)
        assert pulled[0] - len(results) <= 2 * 4  # items are read lazily, a window ahead of the caller
    assert results == [i * i for i in range(40)]
    assert 1 < most[0] <= 4
    unordered = list(map_threads(slow_square, range(40), width=4, ordered=False))
    assert sorted(unordered) == results


def test_a_failing_item_raises_in_the_caller_and_the_threads_end():
    import threading

    from recovery.parallel import map_threads

    def fail_on_seven(i: int) -> int:
        if i == 7:
            raise ValueError("item 7")
        return i

    before = threading.active_count()
    with pytest.raises(ValueError, match="item 7"):
        list(map_threads(fail_on_seven, range(100), width=3))
    assert threading.active_count() == before
    assert list(map_threads(fail_on_seven, range(7), width=1)) == list(range(7))  # width 1: in this thread
