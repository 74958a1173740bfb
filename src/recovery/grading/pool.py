"""Grade many items: fast paths in this process, math-verify in worker processes with hard time bounds.

Budgets are CPU time, not wall time: each item gets ``timeout_s`` seconds of its worker's CPU
(`recovery.grading.symbolic.cpu_budget`), so a busy machine slows grading down but does not turn easy
items into timeouts. Three bounds stop an item that needs more: the CPU timer inside math-verify (the
item gets ``Verdict.TIMEOUT`` and the worker carries on); a kernel CPU limit a little above the budget
(``RLIMIT_CPU``) for a computation stuck inside one C call, where no Python signal handler runs; and a
wall-clock cap (``wall_timeout_s``, far above the budget) for a worker that makes no progress at all.
The last two kill the worker, which is replaced while the others keep going. An item that times out is
tried once more with ``retry_factor`` times the budget, and its detail names the budget its verdict ran
under (``"... (cpu 4 s); retried after no verdict within cpu 1 s"``).

Workers are fresh interpreters started with `subprocess`, not `multiprocessing` processes, talking over
a socket pair: multiprocessing refuses to start children from a daemonic process (a
``multiprocessing.Pool`` worker), and a process forked from one that already started the forkserver
cannot start it again. A subprocess starts the same way from any process or thread, so the grader gives
the same verdicts everywhere. Workers exit when their parent dies (end of file on the socket when idle,
a thread watching the parent's pid when busy), so nothing outlives the process that started them.

Each worker holds one item at a time over its own socket, warmed up (imports and `warm_up`) before it
takes the first, so neither interpreter start-up nor math-verify's import counts against any item.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from recovery.grading.compare import MathVerifyJob
from recovery.grading.grade import DEFAULT_TIMEOUT_S, plan_answer, plan_extracted, plan_response
from recovery.grading.symbolic import budget_label
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = ["Grader"]

#: (pred, gold, rel_tol, abs_tol, cpu budget in seconds): what a worker gets for one item.
_Payload = tuple[str, str, "float | None", "float | None", float]
_Outcome = tuple[str, str]
#: Seconds of CPU the kernel allows past an item's budget before it stops the worker (``RLIMIT_CPU``
#: counts whole seconds; this leaves the CPU timer inside math-verify time to end the item first).
_KERNEL_GRACE_S = 2
#: How often a busy worker checks that its parent is still alive.
_PARENT_POLL_S = 0.2
#: The package's import root, put on a worker's path before anything else is imported there.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[3]); "
    "from recovery.grading.pool import _boot; _boot(int(sys.argv[1]), int(sys.argv[2]))"
)


# -- in the worker ----------------------------------------------------------------------------------------
def _boot(fd: int, parent_pid: int) -> None:
    """A worker interpreter's entry point: watch the parent, take the set-up message, run the loop."""
    _exit_with_parent(parent_pid)
    conn = Connection(fd)
    try:
        path, target, memory_mb = conn.recv()
        sys.path[:] = path  # the parent's path, so the loop function (pickled by name) can be imported
        target = pickle.loads(target)
    except BaseException as exc:  # noqa: BLE001 - say why, then stop
        try:
            conn.send(("fatal", f"worker set-up failed: {type(exc).__name__}: {exc}"))
        except (OSError, ValueError):
            pass
        return
    target(conn, memory_mb)


def _exit_with_parent(parent_pid: int) -> None:
    """Exit this process as soon as ``parent_pid`` is no longer its parent (the parent died)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _limit_resources(memory_mb: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    try:  # a worker the kernel stops for CPU must not leave a core dump behind
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    if memory_mb > 0:
        try:  # a runaway sympy computation should fail with MemoryError, not exhaust the machine
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass


@contextmanager
def _kernel_cpu_limit(budget_s: float) -> Iterator[None]:
    """Let the kernel stop this process (SIGXCPU) a little past ``budget_s`` more seconds of CPU: the
    bound for a computation stuck inside one C call, which the CPU timer's signal cannot interrupt."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(usage.ru_utime + usage.ru_stime + budget_s) + _KERNEL_GRACE_S
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    except (ValueError, OSError):  # pragma: no cover - then the wall-clock cap is the only hard bound
        pass
    try:
        yield
    finally:
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        except (ValueError, OSError):  # pragma: no cover
            pass


def _worker_main(conn: Connection, memory_mb: int, compare: Callable | None = None) -> None:
    """Worker loop: limits, warm-up, "ready", then one item at a time, each under its CPU budget.

    ``compare`` (default: `recovery.grading.symbolic.compare_with_math_verify`) has its signature; tests
    pass a stand-in to exercise the loop's bounds on a computation math-verify would not produce.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; it kills us
    _limit_resources(memory_mb)
    try:
        if compare is None:
            from recovery.grading.symbolic import compare_with_math_verify, warm_up

            logging.getLogger("math_verify").setLevel(logging.ERROR)  # its warnings are about model text
            warm_up()  # first-use set-up must not count against the first item's budget
            compare = compare_with_math_verify
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
        pred, gold, rel_tol, abs_tol, budget_s = job
        try:
            with _kernel_cpu_limit(budget_s):
                verdict, detail = compare(pred, gold, rel_tol=rel_tol, abs_tol=abs_tol, timeout_s=budget_s)
        except MemoryError:
            verdict, detail = Verdict.ERROR, "math-verify ran out of memory"
        except BaseException as exc:  # noqa: BLE001 - a verdict for every job, whatever happens
            verdict, detail = Verdict.ERROR, f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]}"
        try:
            conn.send((str(verdict), detail))
        except (OSError, ValueError):
            return


# -- in the parent ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Worker:
    process: subprocess.Popen
    conn: Connection
    since: float  # start of its start-up, or of its current job
    ready: bool = False
    job: int | None = None
    deadline: float = math.inf  # wall-clock cap of the current job


def _reap(process: subprocess.Popen, timeout: float) -> None:
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def _kill_all(workers: list[_Worker], owner_pid: int) -> None:
    for worker in workers:
        # In a forked copy of the owner these are a sibling's processes: close our copies of the sockets
        # and leave the processes to the owner.
        if os.getpid() == owner_pid and worker.process.poll() is None:
            worker.process.kill()
            _reap(worker.process, 2)
        worker.conn.close()
    workers.clear()


class _WorkerPool:
    """``size`` worker interpreters, each running ``target`` (`_worker_main`); `run` hands out one job
    per worker at a time."""

    def __init__(self, size: int, startup_timeout_s: float, memory_mb: int, target: Callable = _worker_main) -> None:
        self._size = size
        self._target = pickle.dumps(target)
        self._startup_timeout_s = startup_timeout_s
        self._memory_mb = memory_mb
        self.owner_pid = os.getpid()
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _kill_all, self._workers, self.owner_pid)
        for _ in range(size):
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        ours, theirs = socket.socketpair()
        conn = Connection(ours.detach())
        try:
            fd = theirs.fileno()
            argv = [
                sys.executable,
                *subprocess._args_from_interpreter_flags(),
                "-c",
                _BOOT,
                str(fd),
                str(os.getpid()),
                _IMPORT_ROOT,
            ]
            process = subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            conn.close()
            raise
        finally:
            theirs.close()  # the worker has its copy; ours must go, so we see end of file when it dies
        try:
            conn.send((list(sys.path), self._target, self._memory_mb))
        except (OSError, ValueError):
            pass  # it died already: `run` sees end of file and counts a failed start
        return _Worker(process, conn, time.monotonic())

    def _replace(self, index: int) -> None:
        old = self._workers[index]
        if old.process.poll() is None:
            old.process.kill()
        _reap(old.process, 2)
        old.conn.close()
        self._workers[index] = self._spawn()

    def wait_ready(self) -> bool:
        """Block until every worker is warmed up (or start-up failed); True when all are ready."""
        return self.run([]) == [] and all(w.ready for w in self._workers)

    def run(self, jobs: list[tuple[_Payload, float]]) -> list[_Outcome]:
        """One outcome per ``(payload, wall-clock cap)``, in order: a worker's verdict, TIMEOUT or ERROR."""
        for i, w in enumerate(self._workers):
            if w.job is not None:  # left over from an interrupted run: its answer would land in this one
                self._replace(i)
        results: list[_Outcome | None] = [None] * len(jobs)
        queue = deque(range(len(jobs)))
        start_failures = 0
        warming_only = not jobs
        while True:
            for i, w in enumerate(self._workers):
                if w.ready and w.job is None and queue:
                    index = queue.popleft()
                    payload, wall_s = jobs[index]
                    try:
                        w.conn.send(payload)
                    except (OSError, ValueError):  # the idle worker died: replace it, keep the job
                        queue.appendleft(index)
                        self._replace(i)
                        continue
                    w.job, w.since = index, time.monotonic()
                    w.deadline = w.since + wall_s
            busy = [
                i for i, w in enumerate(self._workers) if w.job is not None or (not w.ready and (queue or warming_only))
            ]
            if not busy:
                break
            deadlines = [
                w.deadline if w.job is not None else w.since + self._startup_timeout_s
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
                        _reap(w.process, 1)  # so the exit code is known
                        results[w.job] = self._death(w.process.returncode, jobs[w.job][0][4])
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
                elif w.job is not None and now >= w.deadline:
                    payload, wall_s = jobs[w.job]
                    results[w.job] = (
                        Verdict.TIMEOUT.value,
                        f"no verdict within {wall_s:g} s of wall time "
                        f"({budget_label(payload[4])} budget); worker killed",
                    )
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

    @staticmethod
    def _death(code: int | None, budget_s: float) -> _Outcome:
        if code is not None and code == -getattr(signal, "SIGXCPU", 0):
            return (
                Verdict.TIMEOUT.value,
                f"no verdict within {budget_label(budget_s)}; stuck in one computation, "
                "stopped by the kernel CPU limit",
            )
        return (Verdict.ERROR.value, f"grading worker died (exit code {code})")

    def close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 1.0
        for w in self._workers:
            _reap(w.process, max(0.0, deadline - time.monotonic()))
        self._finalizer()

    def abandon(self) -> None:
        """Forget workers that belong to another process (this one is a fork of their owner)."""
        self._finalizer()


@dataclass
class Grader:
    """Grades many items, never raising for bad model text.

    Items the fast paths settle (numbers, letters, labels, Dyck sequences, identical expressions) are graded
    in this process; the rest go to ``workers`` math-verify worker processes. Each such item gets
    ``timeout_s`` seconds of CPU time; one that needs more gets ``Verdict.TIMEOUT``, after a second try
    with ``retry_factor`` times the budget (``None``: no second try). ``wall_timeout_s`` (default
    ``max(30, 10 * timeout_s)``; times ``retry_factor`` on the second try) caps the wall time an item may
    hold a worker, for a worker that gets no CPU at all; it is a safety net, far above what any item
    needs on a busy machine. Verdict details from math-verify name the budget they ran under. Workers
    start on first need and live until `close` (or the end of a ``with`` block). Identical comparisons
    are sent once per batch and remembered (``cache_size``).

    Works the same in any process, a daemonic ``multiprocessing.Pool`` worker or a forked one included,
    and in any thread (workers are `subprocess` interpreters; see the module docstring). A Grader is not
    thread-safe; use one per thread. After a fork the copy starts its own workers on first need.

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
    _pool: _WorkerPool | None = field(default=None, init=False, repr=False)
    _cache: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)
    # The worker loop (None: `_worker_main`); replaceable before first use so tests can simulate a stuck
    # worker. Not a function default: a function stored on the class would turn into a bound method.
    _worker_target: Callable | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be an int ≥ 1, got {self.workers!r}")
        for name in ("timeout_s", "startup_timeout_s", "wall_timeout_s"):
            value = getattr(self, name)
            if value is None and name == "wall_timeout_s":
                continue
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
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
        if self._pool is not None:
            if self._pool.owner_pid == os.getpid():
                self._pool.close()
            else:
                self._pool.abandon()
            self._pool = None

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_pool(self) -> _WorkerPool:
        if self._pool is not None and self._pool.owner_pid != os.getpid():
            self._pool.abandon()  # a forked copy: those workers answer the parent, not us
            self._pool = None
        if self._pool is None:
            self._pool = _WorkerPool(
                self.workers, self.startup_timeout_s, self.memory_mb, self._worker_target or _worker_main
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

    def _run(self, payloads: list[_Payload], wall_s: float) -> list[_Outcome]:
        try:
            return self._ensure_pool().run([(payload, wall_s) for payload in payloads])
        except Exception as exc:  # noqa: BLE001 - e.g. processes cannot be started here
            self.close()
            return [(Verdict.ERROR.value, f"grading pool failed: {type(exc).__name__}: {exc}")] * len(payloads)
        except BaseException:
            # KeyboardInterrupt mid-run: busy workers would answer into the next run; drop them all.
            self.close()
            raise

    def _remember(self, key: tuple, outcome: _Outcome) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = outcome
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
