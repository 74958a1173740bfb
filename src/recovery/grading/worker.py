"""The grading worker process: set-up, resource limits and the loop that grades one item at a time.

A worker is a fresh interpreter started by `recovery.grading.pool` with `boot` as its entry point. It
exits when the process that started it is gone (`recovery.process_guard`, watching for a new parent) or
when its socket reaches end of file, and leaves Ctrl-C to that process. Before it takes items it limits
its own resources and warms math-verify up, so that neither counts against an item; each item then gets
its CPU budget twice over: the CPU timer inside math-verify (`recovery.grading.symbolic.cpu_budget`), and
a kernel CPU limit (``RLIMIT_CPU``) a little above the budget for a computation stuck inside one C call,
where no Python signal handler runs.
"""

from __future__ import annotations

import logging
import math
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection

from recovery.grading.symbolic import compare_with_math_verify, warm_up
from recovery.process_guard import guard_worker
from recovery.types import Verdict

__all__ = ["KERNEL_GRACE_S", "PARENT_POLL_S", "boot", "kernel_cpu_limit", "limit_resources", "worker_main"]

#: Seconds of CPU the kernel allows past an item's budget before it stops the worker (``RLIMIT_CPU``
#: counts whole seconds; this leaves the CPU timer inside math-verify time to end the item first).
KERNEL_GRACE_S = 2
#: How often a worker checks that its parent is still alive.
PARENT_POLL_S = 0.2


def boot(fd: int, parent_pid: int) -> None:
    """A worker interpreter's entry point: watch the parent, take the set-up message, run the loop.

    The set-up message is the parent's ``sys.path``, the loop function (pickled by name; `worker_main` or
    a test's stand-in) and the memory limit in MiB; a set-up that fails is reported as ``("fatal", why)``.
    """
    guard_worker(parent_pid, PARENT_POLL_S, direct=True)
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


def limit_resources(memory_mb: int) -> None:
    """No core dumps, and at most ``memory_mb`` MiB of address space (0: no memory limit)."""
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
def kernel_cpu_limit(budget_s: float) -> Iterator[None]:
    """Let the kernel stop this process (SIGXCPU) a little past ``budget_s`` more seconds of CPU: the
    bound for a computation stuck inside one C call, which the CPU timer's signal cannot interrupt."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(usage.ru_utime + usage.ru_stime + budget_s) + KERNEL_GRACE_S
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


def worker_main(conn: Connection, memory_mb: int, compare: Callable | None = None) -> None:
    """Worker loop: limits, warm-up, "ready", then one item at a time, each under its CPU budget.

    An item is ``(pred, gold, rel_tol, abs_tol, cpu budget in seconds)``; the reply is
    ``(verdict, detail)``, and ``None`` (or end of file) ends the loop. ``compare`` (default:
    `recovery.grading.symbolic.compare_with_math_verify`) has its signature; tests pass a stand-in to
    exercise the loop's bounds on a computation math-verify would not produce.
    """
    limit_resources(memory_mb)
    try:
        if compare is None:
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
            with kernel_cpu_limit(budget_s):
                verdict, detail = compare(pred, gold, rel_tol=rel_tol, abs_tol=abs_tol, timeout_s=budget_s)
        except MemoryError:
            verdict, detail = Verdict.ERROR, "math-verify ran out of memory"
        except BaseException as exc:  # noqa: BLE001 - a verdict for every job, whatever happens
            verdict, detail = Verdict.ERROR, f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]}"
        try:
            conn.send((str(verdict), detail))
        except (OSError, ValueError):
            return
