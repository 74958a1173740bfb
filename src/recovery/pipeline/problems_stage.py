"""The problems stage: the dataset's problems, loaded once and stored, so the problem set of a run cannot
drift between invocations."""

from __future__ import annotations

from recovery.pipeline.context import Stage, StageContext
from recovery.run_dir import PROBLEMS_TABLE, records


def stage_problems(ctx: StageContext) -> int:
    """Load the dataset once; later runs reuse the stored table (so the problem set cannot drift)."""
    table = ctx.run.table(PROBLEMS_TABLE)
    if table.exists():
        return 0
    from recovery.data import load_problems

    ds = ctx.config.dataset
    problems = load_problems(ds.name, path=ds.path, limit=ds.limit, **ds.options)
    with table.writer(records.PROBLEMS) as writer:
        writer.add_many(records.problem_row(p) for p in problems)
    return len(problems)


STAGE = Stage("problems", stage_problems, "the dataset's problems, stored once")
