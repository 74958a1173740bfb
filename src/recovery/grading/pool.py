"""Math-verify worker processes, seen from the parent: start them, hand out items, enforce the caps.

Budgets are CPU time, not wall time: each item gets ``timeout_s`` seconds of its worker's CPU
(`recovery.grading.symbolic.cpu_budget`), so a busy machine slows grading down but does not turn easy
items into timeouts. Three bounds stop an item that needs more: the CPU timer inside math-verify (the
item gets ``Verdict.TIMEOUT`` and the worker carries on); a kernel CPU limit a little above the budget
(``RLIMIT_CPU``) for a computation stuck inside one C call, where no Python signal handler runs; and a
wall-clock cap (``wall_timeout_s``, far above the budget) for a worker that makes no progress at all.
The first two run inside the worker (`recovery.grading.worker`), the last here; the last two kill the
worker, which is replaced while the others keep going.

Workers are fresh interpreters started with `subprocess`, not `multiprocessing` processes, talking over
a socket pair: multiprocessing refuses to start children from a daemonic process (a
``multiprocessing.Pool`` worker), and a process forked from one that already started the forkserver
cannot start it again. A subprocess starts the same way from any process or thread, so the grader gives
the same verdicts everywhere. Workers exit when their parent dies (end of file on the socket when idle,
`recovery.process_guard` watching the parent when busy), so nothing outlives the process that started
them.

Each worker holds one item at a time over its own socket, warmed up (imports and `warm_up`) before it
takes the first, so neither interpreter start-up nor math-verify's import counts against any item.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from recovery.grading.symbolic import budget_label
from recovery.grading.worker import worker_main
from recovery.types import Verdict

__all__ = ["Outcome", "Payload", "WorkerPool"]

#: (pred, gold, rel_tol, abs_tol, cpu budget in seconds): what a worker gets for one item.
Payload = tuple[str, str, "float | None", "float | None", float]
#: (verdict value, detail): what comes back for one item.
Outcome = tuple[str, str]
#: The package's import root, put on a worker's path before anything else is imported there.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[3]); "
    "from recovery.grading.worker import boot; boot(int(sys.argv[1]), int(sys.argv[2]))"
)


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


def _stop(worker: _Worker, *, owned: bool = True) -> None:
    """Kill ``worker`` if it still runs and close its socket; a worker not ``owned`` (it belongs to the
    process this one was forked from) keeps running: only our copy of its socket is closed."""
    if owned and worker.process.poll() is None:
        worker.process.kill()
        _reap(worker.process, 2)
    worker.conn.close()


def _stop_all(workers: list[_Worker], owner_pid: int) -> None:
    owned = os.getpid() == owner_pid
    for worker in workers:
        _stop(worker, owned=owned)
    workers.clear()


class WorkerPool:
    """``size`` worker interpreters, each running ``target`` (default `recovery.grading.worker.worker_main`);
    `run` hands out one job per worker at a time."""

    def __init__(self, size: int, startup_timeout_s: float, memory_mb: int, target: Callable | None = None) -> None:
        self._size = size
        self._target = pickle.dumps(target or worker_main)
        self._startup_timeout_s = startup_timeout_s
        self._memory_mb = memory_mb
        self.owner_pid = os.getpid()
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _stop_all, self._workers, self.owner_pid)
        for _ in range(size):
            self._workers.append(self._spawn())

    @property
    def owned(self) -> bool:
        """Whether this process started the workers (False in a forked copy of the one that did)."""
        return self.owner_pid == os.getpid()

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
        _stop(self._workers[index])
        self._workers[index] = self._spawn()

    def wait_ready(self) -> bool:
        """Block until every worker is warmed up (or start-up failed); True when all are ready."""
        return self.run([]) == [] and all(w.ready for w in self._workers)

    def run(self, jobs: list[tuple[Payload, float]]) -> list[Outcome]:
        """One outcome per ``(payload, wall-clock cap)``, in order: a worker's verdict, TIMEOUT or ERROR."""
        for i, w in enumerate(self._workers):
            if w.job is not None:  # left over from an interrupted run: its answer would land in this one
                self._replace(i)
        results: list[Outcome | None] = [None] * len(jobs)
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
    def _death(code: int | None, budget_s: float) -> Outcome:
        if code is not None and code == -getattr(signal, "SIGXCPU", 0):
            return (
                Verdict.TIMEOUT.value,
                f"no verdict within {budget_label(budget_s)}; stuck in one computation, "
                "stopped by the kernel CPU limit",
            )
        return (Verdict.ERROR.value, f"grading worker died (exit code {code})")

    def release(self) -> None:
        """Stop the workers: ask them to exit and kill any that do not; in a forked copy of the owner,
        forget them instead (they are the owner's to stop)."""
        if self.owned:
            for w in self._workers:
                try:
                    w.conn.send(None)
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + 1.0
            for w in self._workers:
                _reap(w.process, max(0.0, deadline - time.monotonic()))
        self._finalizer()
