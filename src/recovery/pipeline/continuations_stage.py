"""The continuations stage: N sampled continuations per intervened chain, scheduled for prefix reuse."""

from __future__ import annotations

from collections import Counter

from tqdm.auto import tqdm

from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.continuation_work import (
    BackgroundCommits,
    BatchGeneration,
    ContinuationBatch,
    add_samples,
    continuation_batches,
)
from recovery.pipeline.executors import InThreads, StageWork, run_work
from recovery.pipeline.grading_alongside import GradingAlongside, grading_alongside_enabled
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
    processes meanwhile (`recovery.pipeline.grading_alongside`). The stage's work is built once; where it
    runs is the continuing model's backend's (`BatchGeneration`: one local backend, or the replicas of a Ray
    cluster with ``executor.kind: ray``), and the committed rows and shards are the same either way.
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
                    ctx.log.skip("continuations", chain_id, "unknown_model", f"model {model!r} is not in models")
        for model in unknown:
            pending.pop(model)
    written = 0
    # Rule-based grading runs in worker processes while generation goes on (see grading_alongside).
    grading = GradingAlongside(ctx, problems) if pending and grading_alongside_enabled(ctx) else None
    try:
        with table.writer(records.CONTINUATIONS) as writer:
            committer = BackgroundCommits(writer, grading)
            try:
                for model_name in sorted(pending):
                    written += _continue_model(ctx, model_name, pending[model_name], committer, problems, done, window)
            finally:
                committer.close()  # the batch in flight is finished work: committed even when generation failed
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
    committer: BackgroundCommits,
    problems: dict[str, Problem],
    done,
    window: int,
) -> int:
    """Continue ``model_name``'s pending chains (``total`` of them), committing one batch at a time, in batch
    order. Returns the number of continuations written."""
    # With swap_to (Table 9) another model continues this model's chains and is recorded as such.
    continuing = continuation_model(ctx.config, model_name)
    generation = BatchGeneration.of(ctx.generator(continuing))
    where = f" on {generation.width} replicas" if generation.status is not None else ""
    bar = ctx.bar(total=total, desc=f"continuations [{model_name}]{where}", unit="chain") if ctx.progress else None
    make_request = ContinuationRequests(ctx.plan, continuing)

    def generate(batch: list[dict]) -> tuple[list[dict], list]:
        return batch, list(generation.generate([make_request(problems[r["problem_id"]], r) for r in batch]))

    def commit(result: tuple[list[dict], list]) -> int:
        batch, results = result
        problem_of = {r["id"]: r["problem_id"] for r in batch}
        samples = ContinuationBatch(continuing.name)
        written = sum(add_samples(ctx.log, ctx.plan.prompts, samples, r, problem_of[r.request_id]) for r in results)
        ctx.log.flush()  # before the batch: a kill between the two re-does the batch, never loses a skip
        committer.commit(samples.to_arrow())  # written in the background while the next batch generates
        if bar is not None:
            status = generation.status() if generation.status is not None else None
            if status is None and committer.grading is not None:
                status = f"graded alongside: {committer.grading.written:,} of {committer.grading.submitted:,}"
            if status:
                bar.set_postfix_str(status, refresh=False)
            bar.update(len(batch))
        return written

    def finished() -> None:
        committer.wait()  # this model's last batch is committed before the next model's first
        if bar is not None:
            bar.close()

    batches = continuation_batches(ctx.run.tables.chains, model_name, done, window, ctx.config.flush_every)
    work = StageWork(batches, generate, commit, finished)
    return run_work(work, InThreads(generation.width))


STAGE = Stage("continuations", stage_continuations, "N continuations per intervened chain")
