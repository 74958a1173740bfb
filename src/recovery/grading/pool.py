"""Grade many items: fast paths in this process, math-verify in worker processes with a hard timeout.

Why own worker processes rather than a ``ProcessPoolExecutor``: math-verify relies on SIGALRM, which only
works in a process's main thread, and sympy can still get stuck inside C code where no signal is served.
The only reliable bound is to kill the process. An executor cannot kill one worker (killing any breaks the
whole pool and every pending future) and does not say when an item actually started; here each worker
holds one item at a time over its own pipe, so the timeout runs from the moment the item reached an idle,
warmed-up worker, and a stuck worker is killed and replaced while the others keep going.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable

from recovery.grading.grade import (
    DEFAULT_TIMEOUT_S,
    MathVerifyJob,
    plan_answer,
    plan_extracted,
    plan_response,
)
from recovery.parallel import default_start_method, workers_skip_main
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = ["Grader"]

_Payload = tuple[str, str, "float | None", "float | None", float]
_Outcome = tuple[str, str]


def _worker_main(conn: Connection, memory_mb: int) -> None:
    """Worker loop: warm up (import sympy/math-verify), say "ready", then answer one job at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; it kills us
    if memory_mb > 0:
        try:  # a runaway sympy computation should fail with MemoryError, not exhaust the machine
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
    try:
        import math_verify  # noqa: F401  (warm import: the first job must not pay for it)

        from recovery.grading.symbolic import compare_with_math_verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # its timeout warnings are our verdicts
    except BaseException as exc:  # noqa: BLE001 - report any start-up failure to the parent
        conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        pred, gold, rel_tol, abs_tol, timeout_s = job
        try:
            verdict, detail = compare_with_math_verify(
                pred, gold, rel_tol=rel_tol, abs_tol=abs_tol, timeout_s=timeout_s
            )
        except MemoryError:
            verdict, detail = Verdict.ERROR, "math-verify ran out of memory"
        except BaseException as exc:  # noqa: BLE001 - a verdict for every job, whatever happens
            verdict, detail = Verdict.ERROR, f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]}"
        try:
            conn.send((str(verdict), detail))
        except (OSError, ValueError):
            return


@dataclass(slots=True)
class _Worker:
    process: Any
    conn: Connection
    since: float
    ready: bool = False
    job: int | None = None


def _kill_all(workers: list[_Worker]) -> None:
    for worker in workers:
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=2)
        worker.conn.close()
    workers.clear()


class _WorkerPool:
    """``size`` worker processes, each running `_worker_main`; `run` hands out one job per worker."""

    def __init__(
        self, size: int, context: Any, startup_timeout_s: float, memory_mb: int, target: Callable = _worker_main
    ) -> None:
        self._size = size
        self._target = target
        self._ctx = context
        self._startup_timeout_s = startup_timeout_s
        self._memory_mb = memory_mb
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)
        for _ in range(size):
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=self._target, args=(child, self._memory_mb), name="recovery-grading", daemon=True
        )
        with workers_skip_main():
            process.start()
        child.close()  # so the parent sees EOF when the worker dies
        return _Worker(process, parent, time.monotonic())

    def _replace(self, index: int) -> None:
        old = self._workers[index]
        if old.process.is_alive():
            old.process.kill()
        old.process.join(timeout=2)
        old.conn.close()
        self._workers[index] = self._spawn()

    def wait_ready(self) -> bool:
        """Block until every worker is warmed up (or start-up failed); True when all are ready."""
        return self.run([], 1.0) == [] and all(w.ready for w in self._workers)

    def run(self, payloads: list[_Payload], timeout_s: float) -> list[_Outcome]:
        """One outcome per payload, in order: a worker's verdict, TIMEOUT, or ERROR."""
        for i, w in enumerate(self._workers):
            if w.job is not None:  # left over from an interrupted run: its answer would land in this one
                self._replace(i)
        results: list[_Outcome | None] = [None] * len(payloads)
        queue = deque(range(len(payloads)))
        start_failures = 0
        warming_only = not payloads
        while True:
            for i, w in enumerate(self._workers):
                if w.ready and w.job is None and queue:
                    index = queue.popleft()
                    try:
                        w.conn.send(payloads[index])
                    except (OSError, ValueError):  # the idle worker died: replace it, keep the job
                        queue.appendleft(index)
                        self._replace(i)
                        continue
                    w.job, w.since = index, time.monotonic()
            busy = [
                i
                for i, w in enumerate(self._workers)
                if w.job is not None or (not w.ready and (queue or warming_only))
            ]
            if not busy:
                break
            deadlines = [
                w.since + (timeout_s if w.job is not None else self._startup_timeout_s)
                for w in (self._workers[i] for i in busy)
            ]
            wait([self._workers[i].conn for i in busy], timeout=max(0.0, min(deadlines) - time.monotonic()))
            now = time.monotonic()
            for i in busy:
                w = self._workers[i]
                message: Any = None
                dead = False
                try:
                    if w.conn.poll():
                        message = w.conn.recv()
                except (EOFError, OSError):
                    dead = True
                if dead or (isinstance(message, tuple) and message and message[0] == "fatal"):
                    if w.job is not None:
                        w.process.join(timeout=1)  # reap it, so the exit code is known
                        code = w.process.exitcode
                        results[w.job] = (Verdict.ERROR.value, f"grading worker died (exit code {code})")
                    else:
                        start_failures += 1
                    self._replace(i)
                elif message == "ready":
                    w.ready, start_failures = True, 0
                elif message is not None and w.job is not None:
                    try:
                        verdict, detail = message
                        results[w.job] = (Verdict(verdict).value, str(detail))
                    except (TypeError, ValueError):
                        results[w.job] = (Verdict.ERROR.value, f"malformed worker reply {str(message)[:80]!r}")
                    w.job = None
                elif w.job is not None and now - w.since >= timeout_s:
                    results[w.job] = (Verdict.TIMEOUT.value, f"no verdict within {timeout_s:g} s; worker killed")
                    self._replace(i)
                elif not w.ready and now - w.since >= self._startup_timeout_s:
                    start_failures += 1
                    self._replace(i)
            if start_failures >= 2 * self._size + 1:
                for index in queue:
                    results[index] = (Verdict.ERROR.value, "math-verify workers failed to start")
                queue.clear()
                if not any(w.job is not None for w in self._workers):
                    break
                warming_only = False
        return [r if r is not None else (Verdict.ERROR.value, "no verdict") for r in results]

    def close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 1.0
        for w in self._workers:
            w.process.join(timeout=max(0.0, deadline - time.monotonic()))
        self._finalizer()


@dataclass
class Grader:
    """Grades many items, never raising for bad model text.

    Items the fast paths settle (numbers, letters, labels, Dyck sequences, identical expressions) are graded
    in this process; the rest go to ``workers`` math-verify processes (``forkserver`` start, ``spawn``
    where that is missing), each item with a hard ``timeout_s`` after which it gets ``Verdict.TIMEOUT`` and
    its worker is killed and replaced. Workers start on first need and live until `close` (or the end of a
    ``with`` block). Identical comparisons are sent once per batch and remembered (``cache_size``).

    Workers are started with ``forkserver``/``spawn``, so a script that uses a Grader at import time needs
    the usual ``if __name__ == "__main__":`` guard. A Grader is not thread-safe; use one per thread.

    >>> with Grader(workers=1, timeout_s=2) as grader:
    ...     [g.verdict.value for g in grader.grade_answers([("12", "12", "numeric"), (None, "Yes", "yes_no")])]
    ['correct', 'no_answer']
    """

    workers: int = 2
    timeout_s: float = DEFAULT_TIMEOUT_S
    use_math_verify: bool = True
    start_method: str | None = None
    startup_timeout_s: float = 60.0
    memory_mb: int = 4096
    cache_size: int = 100_000
    _pool: _WorkerPool | None = field(default=None, init=False, repr=False)
    _cache: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)
    # The worker loop (None: `_worker_main`); replaceable before first use so tests can simulate a stuck
    # worker. Not a function default: a function stored on the class would turn into a bound method.
    _worker_target: Callable | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be an int ≥ 1, got {self.workers!r}")
        for name in ("timeout_s", "startup_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if self.start_method is not None and self.start_method not in mp.get_all_start_methods():
            raise ValueError(f"unknown start method {self.start_method!r}")
        if self.start_method == "fork":
            raise ValueError("start_method='fork' is unsafe with threads; use 'forkserver' or 'spawn'")

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> "Grader":
        """Start the workers now and wait until they are warm (otherwise they start on first need)."""
        self._ensure_pool().wait_ready()
        return self

    def close(self) -> None:
        """Stop the workers. The grader may be used again (workers restart on need)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> "Grader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_pool(self) -> _WorkerPool:
        if self._pool is None:
            context = mp.get_context(self.start_method or default_start_method())
            self._pool = _WorkerPool(
                self.workers, context, self.startup_timeout_s, self.memory_mb, self._worker_target or _worker_main
            )
        return self._pool

    # -- grading ---------------------------------------------------------------------------------------
    def grade(self, response: str | None, problem: Problem) -> Grade:
        """Grade one response (see `grade_many`)."""
        return self.grade_many([(response, problem)])[0]

    def grade_many(self, items: Iterable[tuple[str | None, Problem]]) -> list[Grade]:
        """Grade ``(response, problem)`` pairs; one `Grade` per item, in order.

        Bad model text (None, bytes, huge or malformed strings) yields a Grade with a reason, never an
        exception; a ``problem`` that is not a `Problem` raises ``TypeError`` before any work starts.
        """
        pairs = [self._check_pair(item) for item in items]
        planned = [self._safely(plan_response, response, problem) for response, problem in pairs]
        return self._finish(planned)

    def grade_extracted(self, items: Iterable[tuple[str | None, Problem]]) -> list[Grade]:
        """Grade ``(extracted answer, problem)`` pairs, the answers taken out of responses beforehand
        (`recovery.grading.grade.plan_extracted`); the same grades as `grade_many` on the responses."""
        pairs = [self._check_pair(item) for item in items]
        return self._finish([self._safely(plan_extracted, extracted, problem) for extracted, problem in pairs])

    def grade_answers(
        self,
        items: Iterable[tuple[str | None, str, AnswerType | str]],
        *,
        rel_tol: float | None = None,
        abs_tol: float | None = None,
    ) -> list[Grade]:
        """Grade ``(predicted, gold, answer_type)`` triples like `recovery.grading.grade_answer`, in bulk."""
        planned = []
        for item in items:
            predicted, gold, answer_type = item
            planned.append(self._safely(plan_answer, predicted, gold, answer_type, rel_tol=rel_tol, abs_tol=abs_tol))
        return self._finish(planned)

    @staticmethod
    def _check_pair(item: Any) -> tuple[Any, Problem]:
        try:
            response, problem = item
        except (TypeError, ValueError):
            raise TypeError(f"items must be (response, problem) pairs, got {type(item).__name__}") from None
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
        return response, problem

    def _safely(self, planner, *args: Any, **kwargs: Any) -> Grade | MathVerifyJob:
        try:
            return planner(*args, use_math_verify=self.use_math_verify, **kwargs)
        except (TypeError, ValueError) as exc:
            return Grade(Verdict.ERROR, None, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - bad model text must never abort a batch
            return Grade(Verdict.ERROR, None, f"unexpected {type(exc).__name__}: {str(exc)[:200]}")

    def _finish(self, planned: list[Grade | MathVerifyJob]) -> list[Grade]:
        grades: list[Grade | None] = [p if isinstance(p, Grade) else None for p in planned]
        pending: dict[tuple, list[int]] = {}
        for index, job in enumerate(planned):
            if isinstance(job, Grade):
                continue
            key = (job.pred, job.gold, job.rel_tol, job.abs_tol)
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                grades[index] = Grade(cached[0], job.extracted, cached[1])
            else:
                pending.setdefault(key, []).append(index)
        if pending:
            keys = list(pending)
            payloads = [(*key, float(self.timeout_s)) for key in keys]
            try:
                outcomes = self._ensure_pool().run(payloads, float(self.timeout_s))
            except Exception as exc:  # noqa: BLE001 - e.g. processes cannot be started here
                self.close()
                outcomes = [(Verdict.ERROR.value, f"grading pool failed: {type(exc).__name__}: {exc}")] * len(keys)
            except BaseException:
                # KeyboardInterrupt mid-run: busy workers would answer into the next run; drop them all.
                self.close()
                raise
            for key, (verdict, detail) in zip(keys, outcomes):
                if verdict not in (Verdict.TIMEOUT.value, Verdict.ERROR.value):
                    self._remember(key, (verdict, detail))
                for index in pending[key]:
                    job = planned[index]
                    grades[index] = Grade(verdict, job.extracted, detail)  # type: ignore[union-attr]
        return [g if g is not None else Grade(Verdict.ERROR, None, "not graded") for g in grades]

    def _remember(self, key: tuple, outcome: _Outcome) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = outcome
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
