"""Rows of every request in one queue, scored in chunks: how the reward server answers many small requests (a
trainer's per-row reward calls) at the throughput of a few large ones, and how it keeps a transient failure
from ever becoming a score.

Each request's rows join one first-come queue and are admitted only while fewer than ``max_pending_rows`` rows
wait or are being scored (beyond: `Busy`, the server's 503). A dispatcher takes up to ``chunk_rows`` rows at a
time off the queue — from as many requests as are waiting — and keeps ``in_flight`` chunks with the scoring
workers, so while the workers score one round of chunks the next round gathers. Each row is answered through
its own future, so a result cannot reach another row.

A chunk whose worker died (the pool is replaced at once), raised or hung goes back to the front of the queue,
each row up to ``attempts`` times; a row still without a score after that, or when its request's time limit
comes, is answered `retry_row` (``retryable``: no score, never a 0.0), and rows of a request that gave up are
never scored.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.integrations.server.pool import ChunkFailed, ScoringPool, retry_row

__all__ = ["Busy", "RowBatcher"]


class Busy(Exception):
    """The queue holds ``max_pending_rows`` rows already: come back later (503 with ``Retry-After``)."""


@dataclass
class _Row:
    completion: Any
    columns: Mapping[str, Any]
    answer: asyncio.Future
    attempts: int = 0
    failures: list[str] = field(default_factory=list)


class RowBatcher:
    """The queue of rows between the requests and the `ScoringPool` (module doc)."""

    def __init__(
        self,
        pool: ScoringPool,
        *,
        chunk_rows: int,
        max_pending_rows: int,
        in_flight: int,
        attempts: int = 3,
        chunk_timeout_s: float = 60.0,
    ) -> None:
        self.pool, self.chunk_rows, self.max_pending_rows = pool, chunk_rows, max_pending_rows
        self.attempts, self.chunk_timeout_s = attempts, chunk_timeout_s
        self.pending = 0  # rows admitted and not answered yet
        self.retried = 0  # rows scored again after a failed chunk
        self._queue: deque[_Row] = deque()
        self._slots = asyncio.Semaphore(in_flight)
        self._ready = asyncio.Event()
        self._dispatcher: asyncio.Task | None = None
        self._chunks: set[asyncio.Task] = set()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def stop(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            await asyncio.gather(self._dispatcher, return_exceptions=True)
        await asyncio.gather(*self._chunks, return_exceptions=True)

    async def score(
        self, completions: Sequence[Any], rows: Sequence[Mapping[str, Any]], timeout_s: float
    ) -> list[dict[str, Any]]:
        """One result per row, in order: `recovery.integrations.server.pool.row_result`, or `retry_row` for a
        row not scored within ``timeout_s`` seconds or after ``attempts`` failed chunks. `Busy` when the rows
        do not fit in the queue."""
        if self.pending + len(rows) > self.max_pending_rows:
            raise Busy(f"{self.pending} rows already pending; the limit is {self.max_pending_rows}")
        loop = asyncio.get_running_loop()
        mine = [_Row(c, r, loop.create_future()) for c, r in zip(completions, rows, strict=True)]
        self.pending += len(mine)
        self._queue.extend(mine)
        self._ready.set()
        try:
            if mine:
                await asyncio.wait([r.answer for r in mine], timeout=max(0.0, timeout_s))
        finally:
            self.pending -= len(mine)
        out = []
        for row in mine:
            if row.answer.done():
                out.append(row.answer.result())
            else:
                row.answer.cancel()  # still queued: the dispatcher skips it; being scored: its answer dropped
                tried = f" (after {'; '.join(row.failures)})" if row.failures else ""
                out.append(retry_row(f"time limit of {timeout_s:g} s reached before this row was scored{tried}"))
        return out

    async def _dispatch(self) -> None:
        while True:
            await self._ready.wait()
            await self._slots.acquire()
            chunk: list[_Row] = []
            while self._queue and len(chunk) < self.chunk_rows:
                row = self._queue.popleft()
                if not row.answer.done():
                    chunk.append(row)
            if not self._queue:
                self._ready.clear()
            if not chunk:
                self._slots.release()
                continue
            task = asyncio.get_running_loop().create_task(self._run(chunk))
            self._chunks.add(task)
            task.add_done_callback(self._chunks.discard)

    async def _run(self, chunk: list[_Row]) -> None:
        try:
            results = await self.pool.run_chunk(
                [r.completion for r in chunk], [dict(r.columns) for r in chunk], self.chunk_timeout_s
            )
        except ChunkFailed as err:
            self._failed(chunk, str(err))
        else:
            for row, result in zip(chunk, results, strict=True):
                if not row.answer.done():
                    row.answer.set_result(result)
        finally:
            self._slots.release()

    def _failed(self, chunk: list[_Row], reason: str) -> None:
        again = []
        for row in chunk:
            if row.answer.done():
                continue
            row.attempts += 1
            row.failures.append(f"attempt {row.attempts}: {reason}")
            if row.attempts >= self.attempts:
                row.answer.set_result(retry_row("; ".join(row.failures)))
            else:
                again.append(row)
        self.retried += len(again)
        self._queue.extendleft(reversed(again))  # first in line: they have waited longest
        if again:
            self._ready.set()
