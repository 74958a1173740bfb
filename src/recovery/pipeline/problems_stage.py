"""The problems stage: the dataset's problems, loaded once and stored, so the problem set of a run cannot
drift between invocations.

Under the authors' selection (``protocol: reference``, part ``selection``) NuminaMath is loaded without its
load-time cap of 20 problems per answer: the cap comes after the models solved the problems, in the filter
stage (``filters.max_per_answer``). With ``filters.reference_solved`` only the problems a reference model
solved are stored (paper §3.2: DeepSeek-R1's GeneralThoughts traces), each other one a ``problems`` skip
with its reason. A ``traces.source: run`` run copies its source run's problems.
"""

from __future__ import annotations

from recovery.data import HubCopy, load_problems
from recovery.data.general_thoughts import keep_reference_solved, load_reference_solutions
from recovery.pipeline.context import Stage, StageContext
from recovery.pipeline.run_reuse import reuse_problems
from recovery.pipeline.stage_log import StageLog
from recovery.run_dir import records
from recovery.run_filters import ReferenceSolvedConfig


def stage_problems(ctx: StageContext) -> int:
    """Load the dataset once; later runs reuse the stored table (so the problem set cannot drift)."""
    table = ctx.run.tables.problems
    if table.exists():
        return 0
    if ctx.config.traces.source == "run":
        return reuse_problems(ctx)

    ds = ctx.config.dataset
    options = dict(ds.options)
    if ctx.plan.selection.cap_after_filter and ds.name.partition("/")[0] == "numina_olympiads":
        options.setdefault("per_answer_cap", None)  # the authors cap after the intersection (filter stage)
    problems = load_problems(ds.name, path=ds.path, limit=ds.limit, **options)
    solved = ctx.config.traces.filters.reference_solved
    if solved is not None:
        problems = _reference_solved(ctx.log, problems, solved)
    with table.writer(records.PROBLEMS) as writer:
        writer.add_many(records.problem_row(p) for p in problems)
    return len(problems)


def _reference_solved(log: StageLog, problems: list, cfg: ReferenceSolvedConfig) -> list:
    """The problems ``cfg.model`` solved in the GeneralThoughts-style source (`recovery.data.general_thoughts`);
    every other one is stored as a skip of this stage (before the problems table, which marks it done)."""

    hub = HubCopy(cfg.hub_id, cfg.split, cfg.revision)
    solutions = load_reference_solutions(model=cfg.model, path=cfg.path, hub=hub)
    result = keep_reference_solved(problems, solutions)
    for reason, problem_id in result.skips.items():
        log.skip("problems", problem_id, reason, f"{cfg.model} in {cfg.path or cfg.hub_id}")
    log.flush()
    return result.kept


STAGE = Stage("problems", stage_problems, "the dataset's problems, stored once")
