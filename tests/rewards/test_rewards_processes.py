"""CorrectnessReward gives the same rewards in any process: the main process, a thread, a daemonic
``multiprocessing.Pool`` worker (which multiprocessing forbids to have children), a
``ProcessPoolExecutor`` worker, and a process forked from one whose reward already runs math-verify.

Every case scores the same batch of symbolic answers with real math-verify workers.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading

import pytest

from recovery.rewards import CorrectnessReward

# (completion's answer, gold, equivalent): each needs math-verify (none is settled by the fast paths)
CASES = [
    ("\\frac{1}{2}\\sqrt{3}", "\\frac{\\sqrt{3}}{2}", True),
    ("2\\sqrt{3}", "\\sqrt{12}", True),
    ("2\\sqrt{2}", "\\sqrt{12}", False),
    ("x^2+2x+1", "(x+1)^2", True),
    ("x^2+2x", "(x+1)^2", False),
    ("[0, \\frac{1}{2})", "[0, 0.5)", True),
    ("(-\\infty, \\frac{3}{2}]", "(-\\infty, 1.5]", True),
    ("(0, 1)", "[0, 1]", False),
    ("\\frac{\\pi}{4}", "\\frac{1}{4}\\pi", True),
]
BATCH = dict(
    completions=[f"Done.</think>The answer is \\boxed{{{pred}}}." for pred, _, _ in CASES],
    answer=[gold for _, gold, _ in CASES],
    answer_type=["expression"] * len(CASES),
    domain=["math"] * len(CASES),
)
EXPECTED = [1.0 if ok else 0.0 for _, _, ok in CASES]


def score(reward: CorrectnessReward | None = None) -> tuple[list, list, dict]:
    """(rewards, verdicts, non-zero count metrics) of `BATCH`, with a fresh reward unless one is given."""
    own = reward is None
    reward = reward or CorrectnessReward(workers=1)
    metrics, extra = {}, {}
    try:
        rewards = reward(
            **BATCH, log_metric=lambda k, v: metrics.setdefault(k, v), log_extra=lambda k, v: extra.setdefault(k, v)
        )
    finally:
        if own:
            reward.close()
    counts = {k: v for k, v in metrics.items() if v and "accuracy" not in k}
    return rewards, extra["correctness_reward/verdict"], counts


@pytest.mark.slow
def test_same_rewards_in_the_main_process_a_thread_a_pool_worker_and_an_executor_worker() -> None:
    main = score()
    assert main[0] == EXPECTED
    assert main[2] == {}  # no timeouts, errors or unavailable grader

    in_thread: list = []
    thread = threading.Thread(target=lambda: in_thread.append(score()))
    thread.start()
    thread.join(timeout=120)

    results = {"thread": in_thread[0] if in_thread else None}
    for method in ("fork", "spawn"):
        with multiprocessing.get_context(method).Pool(1) as pool:  # daemonic workers
            results[f"Pool ({method})"] = pool.apply_async(score).get(timeout=120)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as executor:
        results["ProcessPoolExecutor"] = executor.submit(score).result(timeout=120)
    assert results == {name: main for name in results}


def is_daemon() -> bool:
    return multiprocessing.current_process().daemon


def test_pool_workers_are_daemonic() -> None:
    """The premise of the test above: a Pool worker is a process multiprocessing lets have no children."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(is_daemon) is True


SHARED = CorrectnessReward(workers=1)  # inherited by forked children as it is, math-verify pool and all


def score_shared() -> tuple[tuple[list, list, dict], int]:
    return score(SHARED), os.getpid()


def test_a_forked_child_of_a_process_using_the_reward_scores_the_same_and_leaves_the_parent_pool_alone() -> None:
    try:
        parent = score(SHARED)
        assert parent[0] == EXPECTED
        worker_pids = [w.process.pid for w in SHARED._grader._pool._workers]
        with multiprocessing.get_context("fork").Pool(1) as pool:
            child, child_pid = pool.apply_async(score_shared).get(timeout=120)
        assert child_pid != os.getpid()
        assert child == parent
        # The child dropped its copy of the parent's grader; the parent's workers were not touched.
        assert [w.process.pid for w in SHARED._grader._pool._workers] == worker_pids
        assert all(w.process.poll() is None for w in SHARED._grader._pool._workers)
        assert score(SHARED) == parent
    finally:
        SHARED.close()
