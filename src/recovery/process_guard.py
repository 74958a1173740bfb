"""Worker processes that never outlive the process they work for.

A `ProcessPoolExecutor` worker blocks on its call queue, whose pipe every worker holds open itself, so it
never sees EOF when the parent is SIGKILLed: the workers, the forkserver they were forked from and the
resource tracker then live on. `guard_worker` is called first in every worker the project starts: a daemon
thread checks every ``interval`` seconds whether the parent still exists and ends the worker when it does
not; SIGINT is ignored, so a Ctrl-C reaches the parent alone, which shuts its pools down cleanly instead
of every worker printing a traceback. `run_guarded` is the pool initializer that does both.
"""

from __future__ import annotations

import os
import signal
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


def guard_worker(parent_pid: int, interval: float = CHECK_INTERVAL_S) -> None:
    """Make this worker exit when ``parent_pid`` is gone, and leave Ctrl-C to the parent."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the caller's own handling stands
        pass

    def watch() -> None:
        event = threading.Event()
        while not event.wait(interval):
            if not parent_alive(parent_pid):
                os._exit(1)

    threading.Thread(target=watch, name="recovery-parent-watch", daemon=True).start()


def run_guarded(parent_pid: int, initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    """A pool initializer: `guard_worker`, then the caller's own ``initializer(*initargs)``."""
    guard_worker(parent_pid)
    if initializer is not None:
        initializer(*initargs)
