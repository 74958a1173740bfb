"""The continuations stage's work: which chains form each committed batch, how a batch is generated (where
and how many at once, `BatchGeneration`), the rows of a batch, and their commit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from recovery.generation import GenerationRequest, GenerationResult, Generator, batched
from recovery.ids import continuation_ids
from recovery.pipeline.grading_alongside import GradingAlongside
from recovery.pipeline.stage_log import StageLog
from recovery.prefetch import prefetched
from recovery.prompt_building import ChatPrompts
from recovery.run_dir import records


def continuation_batches(chains, model_name: str, done, window: int, flush_every: int) -> Iterator[list[dict]]:
    """The batches of rows of the ``chains`` table of ``model_name`` not in ``done``, each committed as one
    shard: windows of ``window`` chains in scheduling order, cut into ``flush_every`` chains. Whatever generates
    them (one local backend, replicas on a cluster) sees the same requests in the same groups."""
    cols = ["id", "trace_id", "problem_id", "model", "cut_index", "intervention", "prefix"]
    for rows in _windows(chains, cols, model_name, done, window):
        yield from batched(rows, flush_every)


class BackgroundCommits:
    """Commits batches of continuations in a background thread, one at a time, while the next is built.

    Writing a shard (Parquet encoding, compression, fsync) runs without the GIL, so it overlaps the main
    thread's Python work. A batch is committed (continuations, then handed to ``grading``) before the next
    one starts committing; ``commit`` first waits for the previous batch, so its errors surface there and at
    most one batch is ever in flight.

    Each batch is one shard of ``writer``.
    """

    def __init__(self, writer, grading: GradingAlongside | None) -> None:
        self.writer = writer
        self.grading = grading
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recovery-commit")
        self._pending: Future | None = None

    def commit(self, arrays: pa.RecordBatch) -> None:
        """Queue ``arrays`` (rows of `records.CONTINUATIONS`) for committing, after the previous batch."""
        self.wait()
        self._pending = self._pool.submit(self._commit, arrays)

    def wait(self) -> None:
        """Wait until the batch in flight, if any, is committed (re-raising its error)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Commit the batch in flight and stop the thread."""
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)

    def _commit(self, arrays: pa.RecordBatch) -> None:
        # Arrow once: the writer and the grading workers take the same arrays (no second conversion, and a
        # batch pickles as buffers rather than a million strings). Committed first, so a grade never exists
        # without its continuation.
        self.writer.add_columns({name: arrays.column(name) for name in records.CONTINUATIONS.names})
        self.writer.flush()
        if self.grading is not None:
            self.grading.submit(*(arrays.column(name) for name in ("id", "chain_id", "problem_id", "text")))


@dataclass(frozen=True)
class BatchGeneration:
    """How the continuations stage generates its batches with one model's backend: ``generate`` turns one
    batch of requests into its results (in request order), ``width`` batches are in flight at once, and
    ``status`` says what the backend has done so far (None: nothing to say).

    A pool of engine replicas (`recovery.pipeline.ray_replicas.RayGenerator`) generates each batch whole on
    one idle replica, a batch per replica in flight; any other backend takes one batch at a time and batches
    inside (the HF backend's rows, vLLM's engine, a server's concurrent requests). The batches and their
    order are the same either way, so are the committed rows and shards."""

    generate: Callable[[list[GenerationRequest]], Iterable[GenerationResult]]
    width: int = 1
    status: Callable[[], str] | None = None

    @classmethod
    def of(cls, generator: Generator) -> BatchGeneration:
        whole = getattr(generator, "generate_whole", None)
        if whole is None:
            return cls(generator.generate)
        return cls(whole, width=generator.concurrency, status=generator.status)


def _windows(chains_table, cols: list[str], model: str, done, window: int) -> Iterator[list[dict]]:
    """Not-yet-continued chains of ``model`` in stored order, ``window`` at a time, each window sorted by
    `continuation_order` (the chains stage writes a trace's chains together, so they stay together)."""
    buffer: list[dict] = []
    # The next window is read while this one is continued (Parquet decoding runs without the GIL).
    for batch in prefetched(chains_table.iter_batches(cols, batch_size=window)):
        for row in batch.to_pylist():
            if row["model"] == model and row["id"] not in done:
                buffer.append(row)
        if len(buffer) >= window:
            # Keep the last trace's chains for the next window so a trace is never split.
            last = buffer[-1]["trace_id"]
            head = [r for r in buffer if r["trace_id"] != last]
            buffer = [r for r in buffer if r["trace_id"] == last]
            if head:
                yield sorted(head, key=continuation_order)
    if buffer:
        yield sorted(buffer, key=continuation_order)


class ContinuationBatch:
    """One committed batch of continuation rows, collected per chain and turned into Arrow at once.

    Values shared by a chain's N samples (chain id, problem id, token counts of the prompt) are kept once
    per chain and repeated in Arrow; only the samples' own values are per row (millions of rows).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.chain_ids: list[str] = []
        self.problem_ids: list[str] = []
        self.prompt_tokens: list[int | None] = []
        self.prefilled_tokens: list[int | None] = []
        self.counts: list[int] = []
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.n_tokens: list[int | None] = []
        self.finish_reasons: list[str | None] = []

    def add(self, result, problem_id: str, texts: list[str]) -> None:
        """Add the samples of one chain's result (``texts`` are its samples' texts, in order)."""
        n = len(texts)
        self.chain_ids.append(result.request_id)
        self.problem_ids.append(problem_id)
        self.prompt_tokens.append(result.prompt_tokens)
        self.prefilled_tokens.append(result.prefilled_tokens)
        self.counts.append(n)
        self.ids.extend(continuation_ids(result.request_id, n))
        self.texts.extend(texts)
        self.n_tokens.extend([sample.n_tokens for sample in result.samples])
        self.finish_reasons.extend([sample.finish_reason for sample in result.samples])

    def to_arrow(self) -> pa.RecordBatch:
        """The rows as a record batch of `records.CONTINUATIONS`."""
        schema = records.CONTINUATIONS
        counts = np.asarray(self.counts, dtype=np.int64)
        rows = int(counts.sum())
        per_row = pa.array(np.repeat(np.arange(len(counts)), counts))  # row → its chain

        def repeated(values: list, name: str) -> pa.Array:
            return pa.array(values, type=schema.field(name).type).take(per_row)

        columns = {
            "id": pa.array(self.ids, type=pa.string()),
            "chain_id": repeated(self.chain_ids, "chain_id"),
            "problem_id": repeated(self.problem_ids, "problem_id"),
            "sample_index": pa.array(np.arange(rows) - np.repeat(np.cumsum(counts) - counts, counts)),
            "model": pa.array([self.model], type=pa.string()).take(np.zeros(rows, dtype=np.int64)),
            "text": pa.array(self.texts, type=pa.string()),
            "n_tokens": pa.array(self.n_tokens, type=pa.int64()),
            "finish_reason": pa.array(self.finish_reasons, type=pa.string()),
            "prompt_tokens": repeated(self.prompt_tokens, "prompt_tokens"),
            "prefilled_tokens": repeated(self.prefilled_tokens, "prefilled_tokens"),
        }
        return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def add_samples(log: StageLog, prompts: ChatPrompts, batch: ContinuationBatch, result, problem_id: str) -> int:
    """Add one chain's N samples (all or none, as ``prompts`` stores outputs) to ``batch``, counting the request
    and any skip in ``log``; returns how many were added (0 on a generation error).

    The caller commits a whole batch at once, so a chain's samples always land in the same shard. A failed
    chain is not marked done: a transient failure (server down) is retried by the next run; its skip row
    counts only while the chain has no continuations (`recovery.run_dir.summary_skips`).
    """
    if result.error or not result.samples:
        log.failed_request("continuations", result.request_id, result.error)
        return 0
    log.requests.sent_one("continuations")
    texts = [prompts.stored_output(sample.text) for sample in result.samples]
    empty = sum(1 for text in texts if not text.strip())
    if empty:
        log.skip("continuations", result.request_id, "empty_generation", f"{empty} of {len(texts)} samples empty")
    batch.add(result, problem_id, texts)
    return len(texts)


def continuation_order(row: dict) -> tuple:
    """Scheduling key for continuation requests: one model at a time, the chains of one trace together,
    shortest cut first. Consecutive requests then share the longest common prompt prefixes (the chat
    prompt and the original steps before the cut), which a prefix cache (vLLM) reuses."""
    return (row["model"], row["trace_id"], row["cut_index"], row["intervention"], row["id"])
