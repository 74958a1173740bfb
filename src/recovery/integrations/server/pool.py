"""The reward server's scoring processes: each holds one `RecoveryReward` (with its own math-verify workers) and
scores chunks of rows; the event loop only waits for them.

Workers are `concurrent.futures.ProcessPoolExecutor` processes started with ``forkserver`` (``spawn`` where
missing), the parent's ``__main__`` hidden while they start (`recovery.parallel.workers_skip_main`: the
``recovery`` script would otherwise run again in each). Each worker exits when the server is gone, even
SIGKILLed (`recovery.process_guard.run_guarded`), and on a normal exit stops its math-verify workers first (a
``multiprocessing.util.Finalize``), so a server shut down with SIGTERM leaves no process behind. A worker that
dies breaks the executor: every chunk it held fails with `ChunkFailed`, the pool is replaced at once, and the
caller (`recovery.integrations.server.batcher`) scores those rows again on the new one.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from recovery.integrations.core import RewardSettings, score_rows, shared_reward, unscorable_reason
from recovery.parallel import default_start_method, workers_skip_main
from recovery.process_guard import run_guarded

__all__ = ["ChunkFailed", "ScoringPool", "retry_row", "row_result"]

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
        "retryable": False,
    }


class ChunkFailed(Exception):
    """A chunk a worker did not score (it died, raised or hung): transient, its rows are worth retrying."""


def retry_row(reason: str) -> dict[str, Any]:
    """A row not scored for a transient reason (a worker that died, the time limit): no score, never a 0.0."""
    return {
        "score": None,
        "correctness": None,
        "doubt": None,
        "length": None,
        "scorable": False,
        "verdict": None,
        "reason": reason,
        "retryable": True,
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
    """``workers`` scoring processes, each scoring one chunk of rows at a time (`run_chunk`)."""

    def __init__(self, workers: int, settings: RewardSettings) -> None:
        if workers < 1:
            raise ValueError("workers must be ≥ 1")
        self.workers, self.settings = workers, settings
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

    async def run_chunk(self, completions: list, rows: list, timeout_s: float) -> list[dict[str, Any]]:
        """One `row_result` per row of one chunk, scored by a worker. `ChunkFailed` when the worker died (the
        pool is replaced first, so a retry lands on a fresh one), raised, or gave no answer within
        ``timeout_s`` (a stuck worker: its answer, should it come, is dropped)."""
        pool, future = self._submit(_score_chunk, self.settings, completions, rows)
        waiting = asyncio.wrap_future(future)
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), max(0.001, timeout_s))
        except TimeoutError:
            future.cancel()
            raise ChunkFailed(f"no answer from a scoring worker within {timeout_s:g} s") from None
        except BrokenProcessPool as err:
            self._broken(pool)
            raise ChunkFailed(f"a scoring worker died: {str(err)[:200]}") from None
        except Exception as err:  # noqa: BLE001 - any failure of the worker is this chunk's, reported
            raise ChunkFailed(f"scoring worker failed: {type(err).__name__}: {str(err)[:200]}") from None

    def close(self) -> None:
        """Stop the workers (each stops its math-verify workers on the way out) and wait for them."""
        with self._lock:
            pool, self._executor = self._executor, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
