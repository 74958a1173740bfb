"""`prefetched`: same items in the same order, errors where they happened, no thread left behind."""

from __future__ import annotations

import threading
import time

import pytest

from recovery.prefetch import prefetched


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "recovery-prefetch"]


@pytest.mark.parametrize("depth", [1, 3])
def test_items_come_in_order(depth):
    assert list(prefetched(iter(range(100)), depth=depth)) == list(range(100))
    assert list(prefetched([], depth=depth)) == []


def test_producer_runs_ahead_of_the_consumer():
    produced: list[int] = []

    def items():
        for i in range(5):
            produced.append(i)
            yield i

    stream = prefetched(items(), depth=2)
    assert next(stream) == 0
    deadline = time.monotonic() + 5
    while len(produced) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert produced == [0, 1, 2]  # item 0 taken, two more waiting: no further
    assert list(stream) == [1, 2, 3, 4]


def test_an_error_is_raised_at_its_item():
    def items():
        yield 1
        yield 2
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for item in prefetched(items()):
            got.append(item)
    assert got == [1, 2]
    assert not _prefetch_threads()


def test_leaving_early_stops_the_producer():
    produced: list[int] = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    for item in prefetched(endless(), depth=1):
        if item == 3:
            break
    assert not _prefetch_threads()
    assert len(produced) <= 6  # it stopped within a couple of items of the consumer


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth"):
        list(prefetched([1], depth=0))
