"""Produce the next items of an iterator in a background thread while the caller works on the current one.

Reading a Parquet batch (decompression, decoding) runs in Arrow's C++ code without the GIL, so a thread
that reads ahead overlaps it with the caller's Python work on the previous batch. The stages that stream a
table while doing per-row Python work (the continuations stage reading chains, the aggregate reading
grades and continuations) read through `prefetched`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_END = object()
_POLL_S = 0.05  # how often a producer blocked on a full queue checks whether the consumer left


def prefetched(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """Yield ``items`` in order while a background thread produces up to ``depth`` items ahead.

    An exception raised while producing is re-raised here, at the item where it happened. Closing the
    returned generator early (``break``, an error in the caller) stops the producer before the next item,
    and the thread is joined before the generator finishes, so no thread outlives its consumer.

    >>> list(prefetched(range(5), depth=2))
    [0, 1, 2, 3, 4]
    """
    if depth < 1:
        raise ValueError(f"depth must be ≥ 1, got {depth}")
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[bool, object]) -> bool:
        while not stop.is_set():
            try:
                handoff.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, _END))
        except BaseException as err:  # noqa: BLE001 — handed to the consumer, which re-raises it
            put((False, err))

    thread = threading.Thread(target=produce, name="recovery-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = handoff.get()
            if not ok:
                raise item  # type: ignore[misc]
            if item is _END:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
