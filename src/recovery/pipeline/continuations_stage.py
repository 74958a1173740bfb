"""The continuations stage: N sampled continuations per intervened chain, scheduled for prefix reuse."""

from __future__ import annotations

from collections import Counter

from tqdm.auto import tqdm

from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.continuation_work import (
    BackgroundCommits,
    ContinuationBatch,
    add_samples,
    continuation_batches,
)
from recovery.pipeline.executors import InThreads, StageWork, run_work
from recovery.pipeline.grading_alongside import GradingAlongside, grading_alongside_enabled
from recovery.pipeline.ray_executor import continue_on_ray
from recovery.plan import ContinuationRequests
from recovery.run_config import continuation_model
from recovery.run_dir import records
from recovery.types import Problem

__all__ = ["STAGE", "stage_continuations"]


def stage_continuations(ctx: StageContext, window: int = 4096) -> int:
    """Sample N continuations per chain. Chains of one trace are scheduled together (shared prefixes hit
    the prefix cache); a chain's N samples are committed together, so a chain is never half-done.

    The chains table is streamed (``window`` rows at a time, one model at a time), so memory does not grow
    with the number of chains. With ``grading.alongside`` each committed batch is graded in worker
    processes meanwhile (`recovery.pipeline.grading_alongside`). With ``executor.kind: ray`` the batches are
    generated on the replicas of a Ray cluster (`recovery.pipeline.ray_executor`), to the same rows.
    """
    table = ctx.run.tables.continuations
    done = table.keys("chain_id")
    problems = ctx.run.problems()
    models = {m.name: m for m in ctx.config.models}
    pending: Counter = Counter()
    for batch in ctx.run.chain_batches(["id", "model"]):
        for chain_id, model in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if chain_id not in done:
                pending[model] += 1
    unknown = {model for model in pending if model not in models}
    if unknown:  # chains of a model the config no longer names: stored skips, so the report counts them
        for batch in ctx.run.chain_batches(["id", "model"]):
            for chain_id, model in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if model in unknown and chain_id not in done:
                    ctx.record_skip("continuations", chain_id, "unknown_model", f"model {model!r} is not in models")
        for model in unknown:
            pending.pop(model)
    written = 0
    # Rule-based grading runs in worker processes while generation goes on (see grading_alongside).
    grading = GradingAlongside(ctx, problems) if pending and grading_alongside_enabled(ctx) else None
    try:
        if ctx.config.executor.kind == "ray" and pending:
            written = continue_on_ray(ctx, pending, problems, done, window, grading)
        else:
            with table.writer(records.CONTINUATIONS) as writer:
                for model_name in sorted(pending):
                    written += _continue_model(
                        ctx, model_name, pending[model_name], writer, problems, done, window, grading
                    )
    finally:
        if grading is not None:
            graded = grading.close()
            if graded:
                ctx.written["grades"] += graded
            if ctx.progress:
                tqdm.write(f"graded alongside generation: {ctx.written['grades']:,} continuations")
    return written


def _continue_model(
    ctx: StageContext,
    model_name: str,
    total: int,
    writer,
    problems: dict[str, Problem],
    done,
    window: int,
    grading: GradingAlongside | None,
) -> int:
    """Continue ``model_name``'s pending chains (``total`` of them), committing one batch at a time; each
    committed batch is also handed to ``grading``. Returns the number of continuations written."""
    # With swap_to (Table 9) another model continues this model's chains and is recorded as such.
    continuing = continuation_model(ctx.config, model_name)
    generator = ctx.generator(continuing)
    bar = ctx.bar(total=total, desc=f"continuations [{model_name}]", unit="chain") if ctx.progress else None
    make_request = ContinuationRequests(ctx.plan, continuing)
    committer = BackgroundCommits(writer, grading)

    def generate(batch: list[dict]) -> tuple[ContinuationBatch, int, int]:
        requests = [make_request(problems[r["problem_id"]], r) for r in batch]
        problem_of = {r["id"]: r["problem_id"] for r in batch}
        samples = ContinuationBatch(continuing.name)
        written = 0
        for result in generator.generate(requests):
            written += add_samples(ctx, samples, result, problem_of[result.request_id])
        return samples, written, len(batch)

    def commit(result: tuple[ContinuationBatch, int, int]) -> int:
        samples, written, chains = result
        ctx.flush_skips()  # before the batch: a kill between the two re-does the batch, never loses a skip
        committer.commit(samples.to_arrow())  # written in the background while the next batch generates
        if bar is not None:
            if grading is not None:
                bar.set_postfix_str(f"graded alongside: {grading.written:,} of {grading.submitted:,}", refresh=False)
            bar.update(chains)
        return written

    def finished() -> None:
        committer.close()  # the batch in flight is finished work: committed even when generation failed
        if bar is not None:
            bar.close()

    work = StageWork(
        continuation_batches(ctx, model_name, done, window),
        generate,
        commit,
        finished,
    )
    # One batch at a time here: the backend batches inside (the HF backend's rows, vLLM's engine, a server's
    # concurrent requests); on Ray the stage uses `continue_on_ray`, which keeps every replica busy.
    return run_work(work, InThreads(1))


STAGE = Stage("continuations", stage_continuations, "N continuations per intervened chain")
