"""`Grader`: many items graded at once, the fast paths in this process and math-verify in a worker pool.

The pool (`recovery.grading.pool`) bounds each math-verify comparison by CPU time, a kernel CPU limit and
a wall-clock cap; the Grader plans the items (`recovery.grading.grade`), sends each distinct comparison
once, retries the ones that time out with a larger budget and remembers the verdicts it may reuse.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from recovery.grading.compare import MathVerifyJob
from recovery.grading.grade import (
    DEFAULT_TIMEOUT_S,
    check_positive,
    plan_answer,
    plan_part,
    plan_response,
)
from recovery.grading.pool import Outcome, Payload, WorkerPool
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = ["Grader"]


@dataclass
class Grader:
    """Grades many items, never raising for bad model text.

    Items the fast paths settle (numbers, letters, labels, Dyck sequences, identical expressions) are graded
    in this process; the rest go to ``workers`` math-verify worker processes. Each such item gets
    ``timeout_s`` seconds of CPU time; one that needs more gets ``Verdict.TIMEOUT``, after a second try
    with ``retry_factor`` times the budget (``None``: no second try), and its detail names the budget its
    verdict ran under (``"... (cpu 4 s); retried after no verdict within cpu 1 s"``). ``wall_timeout_s``
    (default ``max(30, 10 * timeout_s)``; times ``retry_factor`` on the second try) caps the wall time an
    item may hold a worker, for a worker that gets no CPU at all; it is a safety net, far above what any
    item needs on a busy machine. Workers start on first need and live until `close` (or the end of a
    ``with`` block). Identical comparisons are sent once per batch and remembered (``cache_size``).

    Works the same in any process, a daemonic ``multiprocessing.Pool`` worker or a forked one included,
    and in any thread (workers are `subprocess` interpreters; see `recovery.grading.pool`). A Grader is
    not thread-safe; use one per thread. After a fork the copy starts its own workers on first need.

    >>> with Grader(workers=1, timeout_s=2) as grader:
    ...     [g.verdict.value for g in grader.grade_answers([("12", "12", "numeric"), (None, "Yes", "yes_no")])]
    ['correct', 'no_answer']
    """

    workers: int = 2
    timeout_s: float = DEFAULT_TIMEOUT_S
    use_math_verify: bool = True
    startup_timeout_s: float = 60.0
    memory_mb: int = 4096
    cache_size: int = 100_000
    wall_timeout_s: float | None = None
    retry_factor: float | None = 4.0
    _pool: WorkerPool | None = field(default=None, init=False, repr=False)
    _cache: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)
    # The worker loop (None: `recovery.grading.worker.worker_main`); replaceable before first use so tests
    # can simulate a stuck worker. Not a function default: a function stored on the class would turn into
    # a bound method.
    _worker_target: Callable | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be an int ≥ 1, got {self.workers!r}")
        check_positive("timeout_s", self.timeout_s)
        check_positive("startup_timeout_s", self.startup_timeout_s)
        if self.wall_timeout_s is not None:
            check_positive("wall_timeout_s", self.wall_timeout_s)
        factor = self.retry_factor
        if factor is not None and not (isinstance(factor, (int, float)) and factor > 1):
            raise ValueError(f"retry_factor must be > 1 or None, got {factor!r}")

    @property
    def wall_cap_s(self) -> float:
        """The wall-clock cap of a first try (`wall_timeout_s` or its default)."""
        return float(self.wall_timeout_s or max(30.0, 10 * self.timeout_s))

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> Grader:
        """Start the workers now and wait until they are warm (otherwise they start on first need)."""
        self._ensure_pool().wait_ready()
        return self

    def close(self) -> None:
        """Stop the workers. The grader may be used again (workers restart on need)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.release()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_pool(self) -> WorkerPool:
        if self._pool is not None and not self._pool.owned:
            self.close()  # a forked copy: those workers answer the parent, not us
        if self._pool is None:
            self._pool = WorkerPool(self.workers, self.startup_timeout_s, self.memory_mb, self._worker_target)
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

    def grade_parts(self, items: Iterable[tuple[str | None, Problem]]) -> list[Grade]:
        """Grade ``(answer part, problem)`` pairs, each part already cut from its response by its model's
        think tags (`recovery.grading.verdict.graded_part`); extracted as it stands (`plan_part`)."""
        pairs = [self._check_pair(item) for item in items]
        return self._finish([self._safely(plan_part, part, problem) for part, problem in pairs])

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
            budget, wall = float(self.timeout_s), self.wall_cap_s
            outcomes = self._run([(*key, budget) for key in keys], wall)
            again = [i for i, (verdict, _) in enumerate(outcomes) if verdict == Verdict.TIMEOUT.value]
            if again and self.retry_factor:
                factor = float(self.retry_factor)
                retried = self._run([(*keys[i], budget * factor) for i in again], wall * factor)
                for i, (verdict, detail) in zip(again, retried):
                    outcomes[i] = (verdict, f"{detail}; retried after {outcomes[i][1]}")
            for key, (verdict, detail) in zip(keys, outcomes):
                if verdict not in (Verdict.TIMEOUT.value, Verdict.ERROR.value):
                    self._remember(key, (verdict, detail))
                for index in pending[key]:
                    job = planned[index]
                    grades[index] = Grade(verdict, job.extracted, detail)  # type: ignore[union-attr]
        return [g if g is not None else Grade(Verdict.ERROR, None, "not graded") for g in grades]

    def _run(self, payloads: list[Payload], wall_s: float) -> list[Outcome]:
        try:
            return self._ensure_pool().run([(payload, wall_s) for payload in payloads])
        except Exception as exc:  # noqa: BLE001 - e.g. processes cannot be started here
            self.close()
            return [(Verdict.ERROR.value, f"grading pool failed: {type(exc).__name__}: {exc}")] * len(payloads)
        except BaseException:
            # KeyboardInterrupt mid-run: busy workers would answer into the next run; drop them all.
            self.close()
            raise

    def _remember(self, key: tuple, outcome: Outcome) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = outcome
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
