"""Worker processes that never outlive the process they work for.

A `ProcessPoolExecutor` worker blocks on its call queue, whose pipe every worker holds open itself, so it
never sees EOF when the parent is SIGKILLed: the workers, the forkserver they were forked from and the
resource tracker then live on. `guard_worker` is called first in every worker the project starts: a daemon
thread (`watch_parent`) checks every ``interval`` seconds whether the parent is still there and ends the
worker when it is not; SIGINT is ignored, so a Ctrl-C reaches the parent alone, which shuts its workers
down cleanly instead of every worker printing a traceback. `run_guarded` is the pool initializer that does
both.

Two ways to tell that the parent is gone: by default the parent's pid no longer names a process (it works
for a worker started through a forkserver, whose own parent is the forkserver); with ``direct`` (the
worker is the parent's own child) as soon as the worker has a different parent, which also covers a
parent that has died but not yet been reaped.

The process the workers work for ends cleanly too: after a command has returned, the interpreter still
joins threads and runs its atexit callbacks (multiprocessing joins its children, logging flushes …), for a
second or more. A Ctrl-C then would raise `KeyboardInterrupt` inside one of them: Python prints "Exception
ignored in atexit callback" with its traceback and exits with the command's own status (0).
`end_on_interrupt`, armed by the command line once its command has returned, makes Ctrl-C (and SIGTERM)
end the process there in one line with exit status 130, whatever it was doing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

CHECK_INTERVAL_S = 1.0


def parent_alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def parent_gone(parent_pid: int, *, direct: bool = False) -> bool:
    """Whether the process this one works for is gone: with ``direct``, whether ``parent_pid`` is no longer
    this process's parent; otherwise whether no process ``parent_pid`` exists."""
    if direct:
        return os.getppid() != parent_pid
    return not parent_alive(parent_pid)


def watch_parent(parent_pid: int, interval: float = CHECK_INTERVAL_S, *, direct: bool = False) -> None:
    """End this process (exit status 1) once `parent_gone`, checked every ``interval`` seconds by a daemon
    thread."""

    def watch() -> None:
        event = threading.Event()
        while not event.wait(interval):
            if parent_gone(parent_pid, direct=direct):
                os._exit(1)

    threading.Thread(target=watch, name="recovery-parent-watch", daemon=True).start()


def guard_worker(parent_pid: int, interval: float = CHECK_INTERVAL_S, *, direct: bool = False) -> None:
    """Make this worker exit when ``parent_pid`` is gone (`watch_parent`), and leave Ctrl-C to the parent."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the caller's own handling stands
        pass
    watch_parent(parent_pid, interval, direct=direct)


def run_guarded(parent_pid: int, initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    """A pool initializer: `guard_worker`, then the caller's own ``initializer(*initargs)``."""
    guard_worker(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def end_on_interrupt(line: str | None, status: int = 130) -> None:
    """From now until this process ends, SIGINT (Ctrl-C) and SIGTERM end it at once with exit ``status``,
    after writing ``line`` (None: nothing, it was said already) to stderr: no `KeyboardInterrupt` is raised
    in the interpreter's exit work, which is left where it stood (what the process wrote is on disk; its
    workers end with it, see `watch_parent`). A SIGINT ignored since the process started (a background job)
    stays ignored; off the main thread nothing changes (only the main thread may set handlers)."""

    def end(signum, frame) -> None:  # noqa: ANN001 — a signal handler
        with contextlib.suppress(Exception):  # a closed or busy stream must not stop the exit
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        if line is not None:
            with contextlib.suppress(OSError):
                os.write(2, f"{line}\n".encode())
        os._exit(status)

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, end)
