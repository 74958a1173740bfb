"""The continuations stage: N sampled continuations per intervened chain, scheduled for prefix reuse."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from recovery.backends.base import GenerationRequest, batched
from recovery.ids import continuation_id
from recovery.interventions.base import Message
from recovery.pipeline import records
from recovery.pipeline.config import ModelConfig, RunConfig
from recovery.pipeline.context import StageContext, _request_seed, _sampling, load_problems_table, user_prompt
from recovery.pipeline.swap import continuation_model
from recovery.types import Problem

def stage_continuations(ctx: StageContext, window: int = 4096) -> int:
    """Sample N continuations per chain. Chains of one trace are scheduled together (shared prefixes hit
    the prefix cache); a chain's N samples are committed together, so a chain is never half-done.

    The chains table is streamed (``window`` rows at a time, one model at a time), so memory does not grow
    with the number of chains.
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
    cols = ["id", "trace_id", "problem_id", "model", "cut_index", "intervention", "prefix"]
    written = 0
    with table.writer(records.CONTINUATIONS) as writer:
        for model_name in sorted(pending):
            # With swap_to (Table 9) another model continues this model's chains and is recorded as such.
            continuing = continuation_model(ctx.config, model_name)
            generator = ctx.generator(continuing)
            bar = ctx.bar(total=pending[model_name], desc=f"continuations [{model_name}]", unit="chain") if ctx.progress else None
            for rows in _windows(chains_table, cols, model_name, done, window):
                for batch in batched(rows, ctx.config.flush_every):
                    requests = [
                        continuation_request(ctx.config, problems[r["problem_id"]], r, continuing) for r in batch
                    ]
                    problem_of = {r["id"]: r["problem_id"] for r in batch}
                    columns = _continuation_columns()
                    for result in generator.generate(requests):
                        written += _add_samples(ctx, columns, result, continuing.name, problem_of[result.request_id])
                    writer.add_columns(columns)
                    writer.flush()
                    if bar is not None:
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
    chain_id = result.request_id
    for index, sample in enumerate(result.samples):
        if not sample.text.strip():
            ctx.counts[("continuations", "empty_generation")] += 1
        columns["id"].append(continuation_id(chain_id, index))
        columns["chain_id"].append(chain_id)
        columns["problem_id"].append(problem_id)
        columns["sample_index"].append(index)
        columns["model"].append(model_name)
        columns["text"].append(sample.text)
        columns["n_tokens"].append(sample.n_tokens)
        columns["finish_reason"].append(sample.finish_reason)
        columns["prompt_tokens"].append(result.prompt_tokens)
        columns["prefilled_tokens"].append(result.prefilled_tokens)
    return 1


def continuation_request(
    config: RunConfig, problem: Problem, chain_row: dict, model: ModelConfig | None = None
) -> GenerationRequest:
    """The request that samples N continuations of one intervened chain: the problem's chat prompt with
    the intervened reasoning as the assistant prefill, seeded per chain (not per batch)."""
    cfg = config.continuation
    return GenerationRequest(
        request_id=chain_row["id"],
        sampling=_sampling(cfg, seed=_request_seed(cfg.seed, "continuation", chain_row["id"]), model=model),
        messages=(Message("user", user_prompt(config, problem)),),
        prefill=chain_row["prefix"],
    )


def continuation_order(row: dict) -> tuple:
    """Scheduling key for continuation requests: one model at a time, the chains of one trace together,
    shortest cut first. Consecutive requests then share the longest common prompt prefixes (the chat
    prompt and the original steps before the cut), which a prefix cache (vLLM) reuses."""
    return (row["model"], row["trace_id"], row["cut_index"], row["intervention"], row["id"])
