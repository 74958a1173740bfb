"""The reward server's scoring processes: each holds one `RecoveryReward` (with its own math-verify workers) and
scores chunks of rows; the event loop only waits for them.

Workers are `concurrent.futures.ProcessPoolExecutor` processes started with ``forkserver`` (``spawn`` where
missing), the parent's ``__main__`` hidden while they start (`recovery.parallel.workers_skip_main`: the
``recovery`` script would otherwise run again in each). Each worker exits when the server is gone, even
SIGKILLed (`recovery.process_guard.run_guarded`), and on a normal exit stops its math-verify workers first (a
``multiprocessing.util.Finalize``), so a server shut down with SIGTERM leaves no process behind. A worker that
dies breaks the executor: its rows are answered None with the reason and the next request gets a new pool.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from recovery.integrations.core import RewardSettings, score_rows, shared_reward, unscorable_reason
from recovery.parallel import default_start_method, workers_skip_main
from recovery.process_guard import run_guarded

__all__ = ["ScoringPool", "row_result"]

#: A row the math-verify pool is needed for (two forms of one expression): scoring it starts that pool.
_WARM_ROW = {"answer": "x + 1", "answer_type": "expression", "domain": "math", "intervention": "none"}
_WARM_ROW["reference_length"] = None


def row_result(part: Any) -> dict[str, Any]:
    """One scored row as the server answers it. ``reason`` says why a row has no score, or why its answer was
    graded without a verdict (math-verify timed out or failed: 0.0, as the TRL reward gives it)."""
    if part.score is None:
        reason = unscorable_reason(part)
    elif part.verdict in ("timeout", "error"):
        reason = f"the grader gave no verdict ({part.verdict}); correctness counts 0.0, as in the TRL reward"
    else:
        reason = None
    return {
        "score": part.score,
        "correctness": part.correctness,
        "doubt": part.doubt,
        "length": part.length,
        "scorable": part.score is not None,
        "verdict": part.verdict,
        "reason": reason,
    }


def failed_row(reason: str) -> dict[str, Any]:
    return {
        "score": None,
        "correctness": None,
        "doubt": None,
        "length": None,
        "scorable": False,
        "verdict": None,
        "reason": reason,
    }


def _init_worker(settings: RewardSettings) -> None:
    from multiprocessing.util import Finalize

    reward = shared_reward(settings)
    Finalize(None, reward.close, exitpriority=100)  # runs when the worker exits normally (pool shutdown)


def _score_chunk(settings: RewardSettings, completions: list, rows: list) -> list[dict[str, Any]]:
    return [row_result(p) for p in score_rows(shared_reward(settings), completions, rows)]


def _warm(settings: RewardSettings) -> int:
    """Score one row that needs math-verify, so this worker's grading pool is up before the first request."""
    score_rows(shared_reward(settings), ["</think>\\boxed{1 + x}"], [_WARM_ROW])
    return os.getpid()


class ScoringPool:
    """``workers`` scoring processes; `score` splits a batch into chunks of ``chunk_rows`` rows."""

    def __init__(self, workers: int, settings: RewardSettings, *, chunk_rows: int = 64) -> None:
        if workers < 1 or chunk_rows < 1:
            raise ValueError("workers and chunk_rows must be ≥ 1")
        self.workers, self.settings, self.chunk_rows = workers, settings, chunk_rows
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self.restarts = 0

    def _pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                context = mp.get_context(default_start_method())
                initargs = (os.getpid(), _init_worker, (self.settings,))
                self._executor = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=run_guarded, initargs=initargs
                )
            return self._executor

    def _submit(self, fn: Any, *args: Any) -> tuple[ProcessPoolExecutor, Future]:
        pool = self._pool()
        try:
            with workers_skip_main():  # the executor starts its processes inside submit
                return pool, pool.submit(fn, *args)
        except BrokenProcessPool:  # a worker died since the last request: start a new pool
            self._broken(pool)
            pool = self._pool()
            with workers_skip_main():
                return pool, pool.submit(fn, *args)

    def _broken(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is pool:
                self._executor = None
                self.restarts += 1
        pool.shutdown(wait=False, cancel_futures=True)

    def warm(self) -> list[int]:
        """Start every worker and its math-verify pool; returns the workers' pids."""
        futures = [self._submit(_warm, self.settings)[1] for _ in range(self.workers)]
        return sorted({f.result() for f in futures})

    async def score(
        self, completions: Sequence[Any], rows: Sequence[Mapping[str, Any]], timeout_s: float
    ) -> list[dict[str, Any]]:
        """One result per row (`row_result`); rows not scored within ``timeout_s`` seconds, or whose worker
        failed, get ``score`` None and the reason. Never raises for a scoring failure."""
        spans = [(a, min(a + self.chunk_rows, len(rows))) for a in range(0, len(rows), self.chunk_rows)]
        submitted = [
            self._submit(_score_chunk, self.settings, list(completions[a:b]), list(rows[a:b])) for a, b in spans
        ]
        waiting = [asyncio.wrap_future(f) for _, f in submitted]
        if waiting:
            await asyncio.wait(waiting, timeout=max(0.0, timeout_s))
        out: list[dict[str, Any]] = []
        for (a, b), (pool, future), pending in zip(spans, submitted, waiting):
            if not pending.done():
                # Still queued: never scored (no worker time spent on an answer nobody waits for); running: its
                # answer is dropped. (CPython 3.11's executor prints a traceback if a worker then dies while a
                # cancelled chunk is queued; the pool is still replaced and every row still answered.)
                future.cancel()
                pending.cancel()
                out += [failed_row(f"time limit of {timeout_s:g} s reached before this row was scored")] * (b - a)
                continue
            error = pending.exception()
            if error is None:
                out += pending.result()
                continue
            if isinstance(error, BrokenProcessPool):
                self._broken(pool)
            reason = f"scoring worker failed: {type(error).__name__}: {str(error)[:200]}"
            out += [failed_row(reason)] * (b - a)
        return out

    def close(self) -> None:
        """Stop the workers (each stops its math-verify workers on the way out) and wait for them."""
        with self._lock:
            pool, self._executor = self._executor, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
