"""Run CPU-bound pipeline work (rule-based interventions, grading) in worker processes.

The pipeline's non-generation stages are pure Python string work; on a machine with several cores they
split into independent chunks (a group of traces, a batch of continuations). `map_chunks` runs a function
over such chunks in ``workers`` processes and hands each result back in submission order, so the caller
can commit results in a deterministic order: same input, same bytes, whatever the worker count.

Workers start with ``forkserver`` (``spawn`` where missing), never ``fork``: the parent may hold torch or
CUDA state and background threads that a forked child must not inherit. The parent's ``__main__`` is
hidden while they start (`workers_skip_main`), so a training or benchmark script is not re-executed in
every worker.

`map_threads` is the same ordered map for work that waits rather than computes (a remote engine replica,
a server), in threads.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

from recovery.process_guard import run_guarded

T = TypeVar("T")
R = TypeVar("R")


def default_start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn``."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware where the platform says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def workers_skip_main() -> Iterator[None]:
    """Start worker processes without re-running the parent's ``__main__``.

    With ``forkserver``/``spawn`` every new process re-executes the main script (Python 3.11's forkserver
    does not preload it), e.g. a training script's top-level ``import torch, trl``, seconds per worker. Workers only run `recovery` functions, which need nothing from ``__main__``.
    """
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    try:
        main.__dict__.pop("__file__", None)
        main.__dict__["__spec__"] = None
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def map_chunks(
    fn: Callable[[T], R],
    chunks: Iterable[T],
    *,
    workers: int,
    initializer: Callable[..., Any] | None = None,
    initargs: tuple = (),
    max_pending: int | None = None,
    preload: Sequence[str] = (),
) -> Iterator[R]:
    """``fn(chunk)`` for every chunk, computed in ``workers`` processes, yielded in input order.

    At most ``max_pending`` chunks (default ``2·workers``) are in flight, so a long stream of chunks is
    never materialised at once. ``fn`` and ``initializer`` must be importable module-level functions.
    With ``workers <= 1`` everything runs in this process (same results, no process start-up).
    A worker that dies takes the map down with `concurrent.futures.process.BrokenProcessPool`; results
    already yielded (and whatever the caller committed from them) are kept.

    ``preload`` names modules the ``forkserver`` imports once, so every worker forked from it starts with
    them imported instead of importing them itself. A process has one forkserver, started by its first
    pool: callers that share it should pass the same modules.
    """
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        for chunk in chunks:
            yield fn(chunk)
        return
    limit = max_pending or 2 * workers
    context = mp.get_context(default_start_method())
    if preload and context.get_start_method() == "forkserver":
        # "__main__" stays first, as in multiprocessing's default; it is hidden while workers start.
        context.set_forkserver_preload(["__main__", *preload])
    # Every worker exits when this process is gone (even SIGKILLed) and leaves Ctrl-C to it.
    guarded = (os.getpid(), initializer, initargs)
    with ProcessPoolExecutor(workers, mp_context=context, initializer=run_guarded, initargs=guarded) as pool:
        pending: deque[Future] = deque()
        for chunk in chunks:
            with workers_skip_main():  # the executor starts its processes lazily, inside submit
                pending.append(pool.submit(fn, chunk))
            if len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def map_threads(fn: Callable[[T], R], items: Iterable[T], *, width: int, ordered: bool = True) -> Iterator[R]:
    """``fn`` over ``items`` in ``width`` threads, for work that waits (a remote engine, a server) rather
    than computes. Items are read lazily, at most ``2 * width`` in flight, so a caller streaming millions
    of items holds only a window. ``ordered``: results in item order (the caller then writes the same
    bytes whatever ``width``), else as they complete. ``width`` 1 runs in the calling thread, as ``map``."""
    if width <= 1:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="recovery-map")
    in_flight: deque[Future] = deque()
    try:
        for item in items:
            in_flight.append(pool.submit(fn, item))
            while len(in_flight) >= 2 * width:
                yield from _collect(in_flight, ordered)
        while in_flight:
            yield from _collect(in_flight, ordered)
    finally:
        for future in in_flight:
            future.cancel()
        pool.shutdown(wait=True)


def _collect(in_flight: deque, ordered: bool) -> Iterator:
    """The next result (ordered: the oldest item's) or every result already complete (unordered)."""
    if ordered:
        yield in_flight.popleft().result()
        return
    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
    for future in [f for f in in_flight if f in done]:
        in_flight.remove(future)
        yield future.result()
