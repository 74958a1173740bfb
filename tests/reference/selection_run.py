"""The filter stage run on fixture rows in the authors' trace schema (the selection tests' one way to run it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from recovery.model_config import ModelConfig
from recovery.models import spec_for
from recovery.pipeline.context import StageContext
from recovery.pipeline.filter_stage import stage_filter
from recovery.plan import plan_for
from recovery.run_config import DatasetConfig, FilterConfig, GradingConfig, RunConfig, TracesConfig
from recovery.run_dir import records
from recovery.run_dir.records import KEPT_TABLE, PROBLEMS_TABLE, TRACES_TABLE
from recovery.segment import SegmentationError, parse_trace
from recovery.store import RunDir
from recovery.types import Problem


def problem_of(row: Mapping) -> Problem:
    """The row's problem as this project stores it: the bare question (the instruction is the prompt's)."""
    return Problem("math", row["raw_question"], row["reference_answer"], "numeric", "thought_anchors", id=row["id"])


def run_filter(
    path,
    protocol: str,
    rows: Mapping[str, Sequence[Mapping]],
    filters: FilterConfig,
    *,
    grading: GradingConfig | None = None,
    make_generator: Callable | None = None,
) -> tuple[dict[str, list[str]], set[tuple[str, str]]]:
    """Store the problems and traces of ``rows`` (model → rows; each trace read with its model's tags), run the
    filter stage under ``protocol``, and return the problem ids each model kept, in row order, and the (model,
    problem id) of the rows that hold no tag of their model's (the traces stage skips those)."""
    run = RunDir(path)
    problems = {row["id"]: problem_of(row) for model_rows in rows.values() for row in model_rows}
    with run.table(PROBLEMS_TABLE).writer(records.PROBLEMS) as writer:
        writer.add_many(records.problem_row(p) for p in problems.values())
    unparsed = set()
    with run.table(TRACES_TABLE).writer(records.TRACES) as writer:
        for model, model_rows in rows.items():
            for r in model_rows:
                try:
                    trace = parse_trace(r["id"], model, r["answer_content"], tags=spec_for(model).think_tags)
                except SegmentationError:
                    unparsed.add((model, r["id"]))
                    continue
                writer.add(records.trace_row(trace))
    config = RunConfig(
        run_dir=str(run.path),
        dataset=DatasetConfig(name="real_traces"),
        models=[ModelConfig(name=m) for m in rows],
        traces=TracesConfig(filters=filters),
        grading=grading or GradingConfig(),
        protocol=protocol,
    )
    ctx = StageContext(plan_for(config), run, make_generator=make_generator, progress=False)
    try:
        stage_filter(ctx)
    finally:
        ctx.close()
    kept: dict[str, list[str]] = {m: [] for m in rows}
    for row in run.table(KEPT_TABLE).iter_rows():
        if row["kept"]:
            kept[row["model"]].append(row["problem_id"])
    order = {row["id"]: i for model_rows in rows.values() for i, row in enumerate(model_rows)}
    return {m: sorted(ids, key=order.get) for m, ids in kept.items()}, unparsed
