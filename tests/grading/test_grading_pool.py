"""recovery.grading.grader and .pool: Grader keeps order, never raises for bad text, and kills stuck workers.

Fake worker loops (module-level, so worker processes can import them) stand in for math-verify where a
test needs a worker that hangs, dies or cannot start; the rest use the real math-verify workers. CPU
budgets, load and processes that cannot have children are in test_grading_budget.py.
"""

from __future__ import annotations

import os
import time

import pytest

from recovery.grading import Grader, grade_answer, grade_response
from recovery.types import AnswerType, Problem, Verdict

A, V = AnswerType, Verdict


# -- fake worker loops (run in child processes) ------------------------------------------------------
def fake_worker(conn, memory_mb):  # noqa: ARG001 - same signature as the real worker loop
    """Says "correct" for predictions starting with "ok"; "hang" sleeps, "die" exits; counts its calls."""
    conn.send("ready")
    calls = 0
    while True:
        job = conn.recv()
        if job is None:
            return
        pred = job[0].strip("$")  # the prediction comes as math-verify parses it: "$ok$"
        calls += 1
        if pred == "hang":
            time.sleep(600)
        if pred == "die":
            os._exit(3)
        conn.send(("correct" if pred.startswith("ok") else "wrong", f"fake call {calls} in {os.getpid()}"))


def broken_worker(conn, memory_mb):  # noqa: ARG001
    conn.send(("fatal", "ImportError: no math-verify here"))


def problem(answer: str, answer_type: AnswerType = A.EXPRESSION, source: str = "test") -> Problem:
    return Problem("math", "q", answer, answer_type, source)


def fake_grader(**kwargs) -> Grader:
    """A Grader on `fake_worker`; its "hang" sleeps without using CPU, so only the wall-clock cap ends it."""
    grader = Grader(**({"workers": 1, "timeout_s": 1.0, "wall_timeout_s": 1.0, "retry_factor": None} | kwargs))
    grader._worker_target = fake_worker
    return grader


# -- real workers --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grader():
    with Grader(workers=2, timeout_s=3.0) as g:
        yield g


def test_grade_many_matches_in_process_grading_and_keeps_order(grader: Grader) -> None:
    items = [
        ("</think>\\boxed{2\\sqrt{3}}", problem("\\sqrt{12}")),
        ("</think>\\boxed{12}", problem("12", A.NUMERIC)),
        ("</think>The answer is (D).", problem("(D)", A.MULTIPLE_CHOICE)),
        ("</think>\\boxed{x^2+2x+1}", problem("(x+1)^2")),
        ("</think>\\boxed{2\\sqrt{2}}", problem("\\sqrt{12}")),
        ("</think>\\boxed{104}", problem("100", A.NUMERIC, "scibench")),
        ("</think>", problem("1", A.NUMERIC)),
        ("</think>\\boxed{\\frac{\\sqrt{3}}{2}}", problem("0.87", A.NUMERIC, "scibench")),
    ]
    grades = grader.grade_many(items)
    assert [g.verdict for g in grades] == [
        V.CORRECT,
        V.CORRECT,
        V.CORRECT,
        V.CORRECT,
        V.WRONG,
        V.CORRECT,
        V.NO_ANSWER,
        V.CORRECT,
    ]
    assert grades == [grade_response(r, p, timeout_s=3) for r, p in items]
    assert grader.grade(*items[0]) == grades[0]


def test_grade_answers_in_bulk(grader: Grader) -> None:
    items = [("\\frac{1}{2}", "0.5", "numeric"), ("2\\sqrt{3}", "\\sqrt{12}", "expression"), (None, "Yes", "yes_no")]
    assert grader.grade_answers(items) == [grade_answer(*item, timeout_s=3) for item in items]
    assert grader.grade_answers([("104", "100", "numeric")], rel_tol=0.05)[0].verdict is V.CORRECT


def test_bad_model_text_never_raises(grader: Grader) -> None:
    bad = [
        None,
        "",
        b"\xff\xfe\xfd",
        "x" * 10_000_000,
        "\\boxed{",
        "\\boxed{\\boxed{4}}",
        "\\boxed{10**10**10}",
        "\\boxed{10^{10^{10}}}",
        "\\boxed{1e999999}",
        "\udcff\\boxed{4}\udcfe",
        "\\boxed{" * 100_000,
        "</think>" * 1000,
        "\\boxed{\\frac{1}{0}}",
        42,
    ]
    start = time.perf_counter()
    grades = grader.grade_many([(text, problem("4", answer_type)) for text in bad for answer_type in A])
    assert time.perf_counter() - start < 20
    assert len(grades) == len(bad) * len(A)
    assert all(g.detail for g in grades)
    by_text = dict(zip(map(repr, bad), grades[:: len(A)]))  # the EXPRESSION item of each text
    assert by_text["None"].verdict is V.NO_ANSWER
    assert by_text[repr(b"\xff\xfe\xfd")].verdict is V.ERROR and "decode" in by_text[repr(b"\xff\xfe\xfd")].detail
    assert by_text["42"].verdict is V.ERROR
    assert by_text[repr("\\boxed{\\boxed{4}}")].verdict is V.CORRECT
    assert by_text[repr("\\boxed{10^{10^{10}}}")].verdict is V.WRONG


def test_grade_many_rejects_a_non_problem_before_any_work(grader: Grader) -> None:
    with pytest.raises(TypeError):
        grader.grade_many([("\\boxed{4}", "4")])
    with pytest.raises(TypeError):
        grader.grade_many(["\\boxed{4}"])


def test_use_math_verify_false_starts_no_workers() -> None:
    grader = Grader(use_math_verify=False)
    grades = grader.grade_many([("\\boxed{2\\sqrt{3}}", problem("\\sqrt{12}")), ("\\boxed{4}", problem("4"))])
    assert [g.verdict for g in grades] == [V.WRONG, V.CORRECT]
    assert grader._pool is None


# -- hard timeout, dead and broken workers --------------------------------------------------------------
def test_stuck_item_times_out_and_the_run_continues() -> None:
    with fake_grader(workers=1) as grader:
        grades = grader.grade_answers(
            [("hang", "x", "expression"), ("ok", "x", "expression"), ("no", "x", "expression")]
        )
        assert [g.verdict for g in grades] == [V.TIMEOUT, V.CORRECT, V.WRONG]
        assert grades[0].detail == "no verdict within 1 s of wall time (cpu 1 s budget); worker killed"
        # the stuck worker was replaced: its successor answered the other two items
        assert grades[1].detail.startswith("fake call 1 ")


def test_a_timed_out_item_is_retried_once_with_the_longer_budget() -> None:
    with fake_grader(workers=1, retry_factor=2.0) as grader:
        grades = grader.grade_answers([("hang", "x", "expression"), ("ok", "x", "expression")])
    assert [g.verdict for g in grades] == [V.TIMEOUT, V.CORRECT]
    assert grades[0].detail == (
        "no verdict within 2 s of wall time (cpu 2 s budget); worker killed; "
        "retried after no verdict within 1 s of wall time (cpu 1 s budget); worker killed"
    )


def test_dead_worker_gives_error_and_is_replaced() -> None:
    with fake_grader(workers=2) as grader:
        grades = grader.grade_answers(
            [("die", "x", "expression"), ("ok", "x", "expression"), ("die", "y", "expression")]
        )
        assert [g.verdict for g in grades] == [V.ERROR, V.CORRECT, V.ERROR]
        assert "died" in grades[0].detail
        assert grader.grade_answers([("ok", "x", "expression")])[0].verdict is V.CORRECT


def test_workers_that_cannot_start_give_errors_not_hangs() -> None:
    grader = Grader(workers=1, timeout_s=1.0)
    grader._worker_target = broken_worker
    with grader:
        grades = grader.grade_answers([("ok", "y", "expression")] * 2)
    assert [g.verdict for g in grades] == [V.ERROR, V.ERROR]
    assert "failed to start" in grades[0].detail


def test_identical_comparisons_run_once_and_are_cached() -> None:
    with fake_grader(workers=1) as grader:
        first = grader.grade_answers([("ok", "x", "expression")] * 3 + [("no", "x", "expression")])
        assert [g.detail.split(" in ")[0] for g in first] == ["fake call 1"] * 3 + ["fake call 2"]
        again = grader.grade_answers([("ok", "x", "expression")])
        assert again[0].detail == first[0].detail  # from the cache, no third call
        timeouts = grader.grade_answers([("hang", "x", "expression")])
        assert timeouts[0].verdict is V.TIMEOUT
        assert ("$hang$", "x", None, None) not in grader._cache  # timeouts are not remembered


def test_close_and_reuse() -> None:
    grader = fake_grader()
    assert grader.grade_answers([("ok", "x", "expression")])[0].verdict is V.CORRECT
    processes = [w.process for w in grader._pool._workers]
    grader.close()
    assert grader._pool is None
    assert all(p.poll() is not None for p in processes)
    grader.close()  # idempotent
    assert grader.grade_answers([("ok", "x", "expression")])[0].verdict is V.CORRECT  # restarts on need
    grader.close()


def test_start_warms_up_workers() -> None:
    with fake_grader(workers=2) as grader:
        assert grader.start() is grader
        assert all(w.ready for w in grader._pool._workers)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"workers": 0},
        {"workers": 1.5},
        {"timeout_s": 0},
        {"timeout_s": -1},
        {"startup_timeout_s": 0},
        {"wall_timeout_s": 0},
        {"retry_factor": 1},
        {"retry_factor": 0.5},
        {"retry_factor": "2"},
    ],
)
def test_grader_validates_its_config(kwargs) -> None:
    with pytest.raises(ValueError):
        Grader(**kwargs)
