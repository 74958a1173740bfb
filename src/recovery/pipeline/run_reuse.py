"""Runs on another run's problems and traces (``traces.source: run``, ``traces.path`` naming the run directory).

The model-swap ablation (paper §5, Table 9) continues the chains of three models with each of them in turn;
the paper intervenes on the Logic run's traces, the problems all nine models solved. A swap run therefore
does not generate or select anything: its problems stage copies the source run's problems, its traces stage
the source's traces of the run's own models (matched by model name), and its filter stage the source's
verdicts on them (``kept`` rows and clean accuracy), so the swap's chains start from exactly the traces the
Logic run measured. The source must have finished its filter stage.
"""

from __future__ import annotations

from pathlib import Path

from recovery.configs import ConfigError
from recovery.pipeline.context import StageContext
from recovery.run_config import RunConfig
from recovery.run_dir import CLEAN_ACCURACY_FILE, Run, is_run_dir, open_run, records, write_clean_accuracy

__all__ = ["check_source_run", "reuse_problems", "reuse_selection", "reuse_traces", "source_needed"]


def check_source_run(config: RunConfig, *, where: str = "config") -> Run:
    """The source run directory of ``config`` (``traces.path``); `ConfigError` unless it is a run whose filter
    stage is done (problems, traces, ``kept`` and the clean accuracy stored) and that holds traces of each of
    ``config``'s models."""
    path = Path(config.traces.path or "").expanduser()
    key = f"{where}.traces.path"
    if not is_run_dir(path):
        raise ConfigError(f"{key}: {path} is not a run directory (traces.source=run reuses a finished run)")
    source = open_run(path)
    for table in source.tables.selection():
        if not table.exists():
            raise ConfigError(f"{key}: {path} has no {table.path.name} table yet: run its filter stage first")
    if not source.file(CLEAN_ACCURACY_FILE).is_file():
        raise ConfigError(f"{key}: {path} has no {CLEAN_ACCURACY_FILE} yet: run its filter stage first")
    present = {row["model"] for row in source.trace_rows(["model"])}
    missing = [m.name for m in config.models if m.name not in present]
    if missing:
        raise ConfigError(f"{key}: {path} holds no trace of model(s) {', '.join(missing)}")
    return source


def source_needed(config: RunConfig) -> bool:
    """Whether the run still has to copy something from its source (a run that copied all it needs resumes
    without it)."""
    run = open_run(config.run_dir)
    return not (run.tables.kept.exists() and run.file(CLEAN_ACCURACY_FILE).is_file())


def reuse_problems(ctx: StageContext) -> int:
    """Copy the source run's problems (the problems stage of a ``traces.source: run`` run)."""
    source = check_source_run(ctx.config)
    rows = list(source.problem_rows())
    with ctx.run.tables.problems.writer(records.PROBLEMS) as writer:
        writer.add_many(rows)
    return len(rows)


def reuse_traces(ctx: StageContext) -> int:
    """Copy the source run's traces of this run's models (`check_source_run` makes sure it has some of each:
    the swap's models must be among the source's, by name)."""
    table = ctx.run.tables.traces
    if table.exists():
        return 0
    source = check_source_run(ctx.config)
    names = {m.name for m in ctx.config.models}
    rows = [row for row in source.trace_rows() if row["model"] in names]
    with table.writer(records.TRACES) as writer:
        writer.add_many(rows)
    return len(rows)


def reuse_selection(ctx: StageContext) -> int:
    """The source run's filter verdicts on this run's traces, and its clean accuracy of this run's models
    (the filter stage of a ``traces.source: run`` run). Returns how many traces were kept."""
    source = check_source_run(ctx.config)
    ids = ctx.run.tables.traces.keys("id")
    rows = [row for row in source.kept_rows() if row["id"] in ids]
    for row in rows:
        if not row["kept"]:
            ctx.log.count("filter", row["reason"])
    names = {m.name for m in ctx.config.models}
    write_clean_accuracy(ctx.run, [row for row in source.clean_accuracy() if row["model"] in names])
    with ctx.run.tables.kept.writer(records.KEPT, rows_per_shard=max(len(rows), 1)) as writer:
        writer.add_many(rows)
    return sum(1 for row in rows if row["kept"])
