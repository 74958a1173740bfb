"""The continuations stage: N sampled continuations per intervened chain, scheduled for prefix reuse."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterator

import pyarrow as pa

from recovery.backends.base import GenerationRequest, SamplingParams, batched
from recovery.ids import continuation_ids
from recovery.interventions.base import Message
from recovery.pipeline import records
from recovery.pipeline.config import ModelConfig, RunConfig
from recovery.pipeline.context import StageContext, _request_seed, _sampling, load_problems_table, user_prompt
from recovery.pipeline.grading_alongside import GradingAlongside, grading_alongside_enabled
from recovery.pipeline.swap import continuation_model
from recovery.types import Problem


def stage_continuations(ctx: StageContext, window: int = 4096) -> int:
    """Sample N continuations per chain. Chains of one trace are scheduled together (shared prefixes hit
    the prefix cache); a chain's N samples are committed together, so a chain is never half-done.

    The chains table is streamed (``window`` rows at a time, one model at a time), so memory does not grow
    with the number of chains. With ``grading.alongside`` each committed batch is graded in worker
    processes meanwhile (`recovery.pipeline.grading_alongside`).
    """
    chains_table = ctx.run.table("chains")
    table = ctx.run.table("continuations")
    done = table.keys("chain_id")
    problems = load_problems_table(ctx.run)
    models = {m.name: m for m in ctx.config.models}
    pending: Counter = Counter()
    for batch in chains_table.iter_batches(["id", "model"]):
        for chain_id, model in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if chain_id not in done:
                pending[model] += 1
    for model_name in sorted(set(pending) - set(models)):
        ctx.counts[("continuations", "unknown_model")] += pending.pop(model_name)
    written = 0
    # Rule-based grading runs in worker processes while generation goes on (see grading_alongside).
    grading = GradingAlongside(ctx, problems) if pending and grading_alongside_enabled(ctx) else None
    try:
        with table.writer(records.CONTINUATIONS) as writer:
            for model_name in sorted(pending):
                written += _continue_model(ctx, model_name, pending[model_name], writer, problems, done, window, grading)
    finally:
        if grading is not None:
            grading.close()
    return written


def _continue_model(ctx: StageContext, model_name: str, total: int, writer, problems: dict[str, Problem], done,
                    window: int, grading: GradingAlongside | None) -> int:  # fmt: skip
    """Continue ``model_name``'s pending chains (``total`` of them), committing one batch at a time; each
    committed batch is also handed to ``grading``. Returns the number of chains continued."""
    cols = ["id", "trace_id", "problem_id", "model", "cut_index", "intervention", "prefix"]
    # With swap_to (Table 9) another model continues this model's chains and is recorded as such.
    continuing = continuation_model(ctx.config, model_name)
    generator = ctx.generator(continuing)
    bar = ctx.bar(total=total, desc=f"continuations [{model_name}]", unit="chain") if ctx.progress else None
    written = 0
    make_request = ContinuationRequests(ctx.config, continuing)
    for rows in _windows(ctx.run.table("chains"), cols, model_name, done, window):
        for batch in batched(rows, ctx.config.flush_every):
            requests = [make_request(problems[r["problem_id"]], r) for r in batch]
            problem_of = {r["id"]: r["problem_id"] for r in batch}
            columns = _continuation_columns()
            for result in generator.generate(requests):
                written += _add_samples(ctx, columns, result, continuing.name, problem_of[result.request_id])
            # Arrow once: the writer and the grading workers take the same arrays (no second conversion,
            # and a batch pickles as buffers rather than a million strings).
            arrays = pa.RecordBatch.from_pydict(columns, schema=records.CONTINUATIONS)
            writer.add_columns({name: arrays.column(name) for name in records.CONTINUATIONS.names})
            writer.flush()
            if grading is not None:  # committed first, so a grade never exists without its continuation
                grading.submit(*(arrays.column(name) for name in ("id", "chain_id", "problem_id", "text")))
            if bar is not None:
                if grading is not None:
                    bar.set_postfix_str(f"graded alongside: {grading.written:,}", refresh=False)
                bar.update(len(batch))
    if bar is not None:
        bar.close()
    return written


def _windows(chains_table, cols: list[str], model: str, done, window: int) -> Iterator[list[dict]]:
    """Not-yet-continued chains of ``model`` in stored order, ``window`` at a time, each window sorted by
    `continuation_order` (the chains stage writes a trace's chains together, so they stay together)."""
    buffer: list[dict] = []
    for batch in chains_table.iter_batches(cols, batch_size=window):
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


def _continuation_columns() -> dict[str, list]:
    """Empty column lists for a batch of continuation rows (built column-wise: millions of rows)."""
    return {name: [] for name in records.CONTINUATIONS.names}


def _add_samples(ctx: StageContext, columns: dict[str, list], result, model_name: str, problem_id: str) -> int:
    """Add one chain's N samples (all or none) to ``columns``; returns 1 if added, 0 on a generation error.

    The caller commits a whole batch at once, so a chain's samples always land in the same shard.
    """
    if result.error or not result.samples:
        # Not marked done: a transient failure (server down) is retried by the next run.
        ctx.counts[("continuations", "generation_error")] += 1
        return 0
    chain_id, samples = result.request_id, result.samples
    n = len(samples)
    texts = [sample.text for sample in samples]
    empty = sum(1 for text in texts if not text.strip())
    if empty:
        ctx.counts[("continuations", "empty_generation")] += empty
    # Whole columns are extended per chain (not appended per sample): millions of rows.
    columns["id"].extend(continuation_ids(chain_id, n))
    columns["chain_id"].extend([chain_id] * n)
    columns["problem_id"].extend([problem_id] * n)
    columns["sample_index"].extend(range(n))
    columns["model"].extend([model_name] * n)
    columns["text"].extend(texts)
    columns["n_tokens"].extend([sample.n_tokens for sample in samples])
    columns["finish_reason"].extend([sample.finish_reason for sample in samples])
    columns["prompt_tokens"].extend([result.prompt_tokens] * n)
    columns["prefilled_tokens"].extend([result.prefilled_tokens] * n)
    return 1


def continuation_request(
    config: RunConfig, problem: Problem, chain_row: dict, model: ModelConfig | None = None
) -> GenerationRequest:
    """The request that samples N continuations of one intervened chain: the problem's chat prompt with
    the intervened reasoning as the assistant prefill, seeded per chain (not per batch)."""
    return ContinuationRequests(config, model)(problem, chain_row)


class ContinuationRequests:
    """`continuation_request` for many chains of one continuing model: the sampling parameters shared by
    every request are resolved once, and each request only gets its own seed."""

    def __init__(self, config: RunConfig, model: ModelConfig | None = None) -> None:
        self.config = config
        self.seed = config.continuation.seed
        shared = _sampling(config.continuation, model=model)  # validated once here
        self.shared = {f.name: getattr(shared, f.name) for f in dataclasses.fields(shared) if f.name != "seed"}

    def __call__(self, problem: Problem, chain_row: dict) -> GenerationRequest:
        chain_id = chain_row["id"]
        return GenerationRequest(
            request_id=chain_id,
            sampling=SamplingParams(**self.shared, seed=_request_seed(self.seed, "continuation", chain_id)),
            messages=(Message("user", user_prompt(self.config, problem)),),
            prefill=chain_row["prefix"],
        )


def continuation_order(row: dict) -> tuple:
    """Scheduling key for continuation requests: one model at a time, the chains of one trace together,
    shortest cut first. Consecutive requests then share the longest common prompt prefixes (the chat
    prompt and the original steps before the cut), which a prefix cache (vLLM) reuses."""
    return (row["model"], row["trace_id"], row["cut_index"], row["intervention"], row["id"])
