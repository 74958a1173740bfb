"""Rule-based grading while the continuations are still being generated.

Generation is the long part of a run and, on GPUs, leaves the CPUs idle; grading is CPU work. So each
batch of continuations, once committed, is handed to grading worker processes
(`recovery.pipeline.grade_workers`) and graded while the next batch is generated. The grades stage then
only grades what is still missing (nothing, after an uninterrupted run).

Nothing is lost or duplicated if the run dies: a batch's grades are committed as one atomic shard after
its continuations were, and grades are keyed by continuation id, which the grades stage checks. A
continuation that already has a stored grade is not graded again (a shard of continuations deleted and
regenerated on a resume holds the ids graded before). A failure of the grading workers never stops
generation: it is counted, and the grades stage grades those batches.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

import recovery.pipeline.grade_workers as grade_workers
from recovery.parallel import map_chunks
from recovery.pipeline.chain_workers import WORKER_MODULES, cpu_workers
from recovery.pipeline.context import StageContext
from recovery.run_dir import records
from recovery.types import Problem

log = logging.getLogger(__name__)

# Shards of grades written alongside generation are named by this prefix and their batch number (the
# grades stage uses ``g``), so both kinds can sit in one table.
WRITER_PREFIX = "i"


def grading_alongside_enabled(ctx: StageContext) -> bool:
    """Whether `GradingAlongside` should run: rule-based grading only (a judge needs a model backend) and
    ``grading.alongside`` on, with at least two CPUs for the pipeline (one core would only interleave)."""
    grading = ctx.config.grading
    return grading.alongside and grading.judge is None and cpu_workers(ctx.config) >= 2


class GradingAlongside:
    """Grades committed batches of continuations in worker processes, in the background.

    ``submit`` queues a batch (blocking when ``max_waiting`` batches already wait, so a fast generator
    cannot pile up texts in memory); ``close`` waits for every queued batch and returns how many
    continuations were graded. Grades are outcomes, not skips: the run reads their verdicts back from the
    grades table; only a failure of the workers is counted in ``ctx.log.counts``.
    """

    def __init__(
        self,
        ctx: StageContext,
        problems: dict[str, Problem],
        *,
        workers: int | None = None,
        max_waiting: int | None = None,
    ) -> None:
        self.ctx = ctx
        self.problems = problems
        self.workers = workers or cpu_workers(ctx.config)
        self.written = 0
        self.submitted = 0
        self.failed: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=max_waiting or self.workers)
        self._next_index = 0
        self._graded = ctx.run.tables.grades.keys("id")  # graded before this run started
        self._thread = threading.Thread(target=self._drain, name="recovery-grading", daemon=True)
        self._thread.start()

    def submit(
        self, ids: Sequence[str], chain_ids: Sequence[str], problem_ids: Sequence[str], texts: Sequence[str | None]
    ) -> None:
        """Queue one committed batch of continuations for grading (parallel lists or Arrow arrays); those with
        a stored grade are left out."""
        if len(ids) and len(self._graded):
            ids, chain_ids, problem_ids, texts = _without(self._graded, ids, chain_ids, problem_ids, texts)
        if len(ids) == 0 or self.failed is not None:
            return  # after a failure the grades stage grades the rest
        self.submitted += len(ids)
        problems = grade_workers.chunk_problems(problem_ids, lambda pid: records.problem_row(self.problems[pid]))
        chunk = grade_workers.GradeChunk(
            self._next_index, str(self.ctx.run.path), ids, chain_ids, problem_ids, texts, problems, WRITER_PREFIX
        )
        self._next_index += 1
        self._queue.put(chunk)

    def close(self) -> int:
        """Grade everything queued, stop the workers; returns the number of continuations graded."""
        self._queue.put(None)
        self._thread.join()
        if self.failed is not None:
            self.ctx.log.count("grades", "grading_alongside_failed")
        return self.written

    def _chunks(self):
        while (chunk := self._queue.get()) is not None:
            yield chunk

    def _drain(self) -> None:

        chunks = self._chunks()
        try:
            for count, _ in map_chunks(
                grade_workers.grade_chunk,
                chunks,
                workers=self.workers,
                initializer=grade_workers.init_worker,
                initargs=(self.ctx.config,),
                preload=WORKER_MODULES,
            ):
                self.written += count
        except BaseException as err:  # noqa: BLE001 — generation must go on; the grades stage catches up
            self.failed = err
            log.warning(
                "grading alongside generation stopped (%s: %s); the grades stage will grade the rest",
                type(err).__name__,
                err,
            )
            for _ in chunks:  # keep accepting batches until close(), so submit never blocks for ever
                pass


def _without(graded, ids, *columns):
    """``ids`` and the parallel ``columns`` without the rows whose id is in ``graded`` (a `KeySet`)."""
    keep = ~graded.contains_many(ids if isinstance(ids, list) else ids.to_pylist())
    if keep.all():
        return (ids, *columns)
    if isinstance(ids, list):
        return tuple([v for v, k in zip(col, keep) if k] for col in (ids, *columns))
    import pyarrow as pa

    mask = pa.array(keep)
    return tuple(col.filter(mask) for col in (ids, *columns))
