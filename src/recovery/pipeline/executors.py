"""What a stage does, declared (`StageWork`), and what runs it (an `Executor`).

A stage states its pending batches, the work done on one batch and how one batch's result is committed. An executor runs the work on the batches and
hands the results back **in batch order**, so the committed rows are the same, in the same order, whichever
executor ran them and however wide it is:

- `InThreads` — work that waits on a backend (a model's replicas on a Ray cluster, a server): as many batches
  in flight as the backend's ``concurrency`` (`recovery.generation.Generator`), 1 for a local backend;
- `InProcesses` — pure CPU work (rule-based interventions, grading) in worker processes
  (`recovery.parallel.map_chunks`), each started with the stage's settings.

Generation on a Ray cluster is a backend (`recovery.pipeline.ray_replicas.RayGenerator`, its replicas the
``concurrency``), so the stages that call a model run on Ray through `InThreads` unchanged; the continuations
stage keeps one whole batch per replica in flight (`recovery.pipeline.continuation_work.BatchGeneration`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from recovery.parallel import map_chunks, map_threads

B = TypeVar("B")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``work`` on every batch and yields the results in batch order."""

    def map(self, work: Callable[[B], R], batches: Iterable[B]) -> Iterator[R]: ...


@dataclass(frozen=True)
class InThreads:
    """Batches in threads, ``width`` in flight (1: one after the other, in this thread's order)."""

    width: int = 1

    def map(self, work: Callable[[B], R], batches: Iterable[B]) -> Iterator[R]:
        return map_threads(work, batches, width=self.width)


@dataclass(frozen=True)
class InProcesses:
    """Batches in ``workers`` worker processes, each started by ``initializer(*initargs)`` (``work`` must be a
    module-level function of a module in ``preload``, so it pickles by name)."""

    workers: int
    initializer: Callable[..., None] | None = None
    initargs: tuple[Any, ...] = ()
    preload: Sequence[str] = ()

    def map(self, work: Callable[[B], R], batches: Iterable[B]) -> Iterator[R]:
        return map_chunks(
            work,
            batches,
            workers=self.workers,
            initializer=self.initializer,
            initargs=self.initargs,
            preload=tuple(self.preload),
        )


@dataclass(frozen=True)
class StageWork(Generic[B, R]):
    """One stage's work, declared: ``batches`` are what is pending, ``work`` turns one batch into a result (in
    an executor) and ``commit`` stores that result and returns the rows it wrote (in the stage's process)."""

    batches: Iterable[B]
    work: Callable[[B], R]
    commit: Callable[[R], int]
    done: Callable[[], None] = field(default=lambda: None)  # after the last commit (close writers, bars)


def run_work(work: StageWork[B, R], executor: Executor) -> int:
    """Run ``work`` on ``executor``, committing each batch's result in batch order; the rows written."""
    written = 0
    try:
        for result in executor.map(work.work, work.batches):
            written += work.commit(result)
    finally:
        work.done()
    return written
