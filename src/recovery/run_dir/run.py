"""One door to a run directory: `open_run` (``recovery.run_dir.open``) gives a `Run`, the typed reader of a run
and the handle its writers get their tables from.

Why one door: the table names, which columns hold what and how rows become `recovery.types` records are this
package's business; a stage, an analysis or an export that opened tables by name itself would have to know
them all, and four modules once kept their own readers. Through a `Run`:

- ``run.config`` is the `RunConfig` the run was created with and ``run.manifest`` the manifest as stored
  (both read once, on first use: a run being created has no manifest yet);
- ``problems()`` and ``traces()`` give records, the ``*_rows`` and ``*_batches`` readers give stored rows
  (columns selectable; Arrow record batches for the tables of millions of rows), ``kept_ids()`` the traces
  the filter kept; every call reads the table again, so a stage sees what the stage before it just wrote;
- ``aggregates()``, ``clean_accuracy()`` and ``summary()`` read the JSON files beside the tables;
- ``run.tables.chains`` (and each other table by name) is the `recovery.store.Table` the pipeline's stages
  write, or count and key.

`Run` is a `recovery.store.RunDir`, so the run directory's own readers (`recovery.run_dir.readers`,
`recovery.run_dir.tallies` …) take it as they are.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from recovery.plan import RunPlan, TraceReading, plan_for
from recovery.run_config import RunConfig, ThinkTagsOf
from recovery.run_dir.files import (
    MANIFEST,
    SUMMARY_FILE,
    is_run_dir,
    read_aggregates,
    read_clean_accuracy,
    read_json_file,
    read_manifest,
    run_config_from_manifest,
)
from recovery.run_dir.records import (
    CHAINS_TABLE,
    CONTINUATIONS_TABLE,
    GRADES_TABLE,
    JUDGE_DISAGREEMENTS_TABLE,
    KEPT_TABLE,
    PROBLEMS_TABLE,
    SKIPS_TABLE,
    TRACES_TABLE,
    problem_from_row,
    trace_from_row,
)
from recovery.store import RunDir, Table
from recovery.types import Problem, Trace

__all__ = ["Run", "Tables", "open_run"]

# Rows per batch of the row readers, and of the batch readers (those of `recovery.store.Table`).
ROWS_BATCH = 8_192
ARROW_BATCH = 65_536


def _stored(name: str) -> property:
    """A read-only attribute of `Tables`: the run's table stored under ``name``, opened when read."""
    return property(lambda tables: tables._run.table(name), doc=f"The run's ``{name}`` table.")


class Tables:
    """A run's tables by name, each a `recovery.store.Table` (what the pipeline's stages write through)."""

    __slots__ = ("_run",)

    problems = _stored(PROBLEMS_TABLE)
    traces = _stored(TRACES_TABLE)
    kept = _stored(KEPT_TABLE)
    chains = _stored(CHAINS_TABLE)
    skips = _stored(SKIPS_TABLE)
    continuations = _stored(CONTINUATIONS_TABLE)
    grades = _stored(GRADES_TABLE)
    judge_disagreements = _stored(JUDGE_DISAGREEMENTS_TABLE)

    def __init__(self, run: RunDir) -> None:
        self._run = run

    def selection(self) -> tuple[Table, ...]:
        """The tables a run's selection lives in (problems, traces and the filter's verdicts): what a run that
        reuses another's traces copies, and what an ablation over a run's traces shares with it."""
        return (self.problems, self.traces, self.kept)


class Run(RunDir):
    """A run directory read through its records (see the module doc); ``tables`` for its writers."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path)
        self.tables = Tables(self)

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The manifest as stored (a plain mapping: what describes or hashes the run as it was written, also when
        the current `RunConfig` can no longer read it). `recovery.configs.ConfigError` when there is none."""
        return read_manifest(self.path)

    @cached_property
    def config(self) -> RunConfig:
        """The `RunConfig` the run was created with (fields added since take their defaults)."""
        return run_config_from_manifest(self.manifest, where=str(self.path / MANIFEST))

    @cached_property
    def plan(self) -> RunPlan:
        """The run's plan (`recovery.plan`): what each protocol part of the run ran."""
        return plan_for(self.config)

    @cached_property
    def reading(self) -> TraceReading | None:
        """How the run reads a response into a trace (its plan's `recovery.plan.TraceReading`); None for a
        folder without a manifest (the project's reading)."""
        return self.plan.reading if is_run_dir(self.path) else None

    @cached_property
    def think_tags(self) -> ThinkTagsOf:
        """``think_tags(model_name)``: the think tags that alone decide where a model's responses in this run
        end their reasoning (the manifest's models; a folder without one: what each model's name says)."""
        return ThinkTagsOf(self.config.models if is_run_dir(self.path) else ())

    def parse_trace(self, row: Mapping[str, Any]) -> Trace:
        """The `Trace` of a stored trace row (``id``, ``problem_id``, ``model``, ``text``), read as the run's plan
        reads a response (`recovery.plan.TraceReading`: the project's by its model's own think tags,
        `recovery.segment.SegmentationError` when they are not in its text)."""
        return trace_from_row(row, self.think_tags(row["model"]), self.reading)

    def problems(self) -> dict[str, Problem]:
        """Every stored problem by id, in table order."""
        return {row["id"]: problem_from_row(row) for row in self.tables.problems.iter_rows()}

    def problem_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        return self.tables.problems.iter_rows(columns)

    def traces(self, ids: Collection[str] | None = None, *, kept: bool = False) -> dict[str, Trace]:
        """The stored original traces by id, parsed into steps, in table order: those in ``ids`` only (when
        given), and those the filter kept only (``kept=True``)."""
        wanted = ids
        if kept:
            kept_ids = self.kept_ids()
            wanted = kept_ids if ids is None else {i for i in ids if i in kept_ids}
        traces = {}
        for row in self.tables.traces.iter_rows(["id", "problem_id", "model", "text"]):
            if wanted is None or row["id"] in wanted:
                trace = self.parse_trace(row)
                traces[trace.id] = trace
        return traces

    def trace_rows(
        self, columns: Sequence[str] | None = None, *, batch_size: int = ROWS_BATCH
    ) -> Iterator[dict[str, Any]]:
        """The stored trace rows (``batch_size`` rows read at a time: a smaller one starts a consumer sooner)."""
        return self.tables.traces.iter_rows(columns, batch_size=batch_size)

    def kept_ids(self) -> set[str]:
        """The ids of the traces the filter kept (empty before the filter stage ran)."""
        return {row["id"] for row in self.tables.kept.iter_rows(["id", "kept"]) if row["kept"]}

    def kept_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        """The filter's verdict per trace: ``id``, ``model``, ``problem_id``, ``kept``, ``reason``."""
        return self.tables.kept.iter_rows(columns)

    def chain_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        return self.tables.chains.iter_rows(columns)

    def chain_batches(self, columns: Sequence[str] | None = None, *, batch_size: int = ARROW_BATCH) -> Iterator[Any]:
        """The chains as Arrow record batches (column-wise reading of a table that may hold millions of rows)."""
        return self.tables.chains.iter_batches(columns, batch_size=batch_size)

    def continuation_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        return self.tables.continuations.iter_rows(columns)

    def continuation_batches(
        self, columns: Sequence[str] | None = None, *, batch_size: int = ARROW_BATCH
    ) -> Iterator[Any]:
        return self.tables.continuations.iter_batches(columns, batch_size=batch_size)

    def grade_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        return self.tables.grades.iter_rows(columns)

    def grade_batches(self, columns: Sequence[str] | None = None, *, batch_size: int = ARROW_BATCH) -> Iterator[Any]:
        return self.tables.grades.iter_batches(columns, batch_size=batch_size)

    def skip_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        return self.tables.skips.iter_rows(columns)

    def aggregates(self) -> list[dict[str, Any]]:
        """The aggregate stage's flat rows (NaN restored); empty before it ran."""
        return read_aggregates(self)

    def clean_accuracy(self) -> list[dict[str, Any]]:
        """The filter stage's clean accuracy per (model, domain); empty before it ran."""
        return read_clean_accuracy(self)

    def summary(self) -> dict[str, Any]:
        """What the last invocation wrote and skipped (``summary.json``); empty before a run finished one."""
        path = self.file(SUMMARY_FILE)
        return read_json_file(path) if path.is_file() else {}


def open_run(path: str | os.PathLike | RunDir) -> Run:
    """The `Run` at ``path`` (a `Run` is returned as is). Nothing is read yet: a folder the pipeline is about to
    create opens as well, and ``config`` fails (with `recovery.configs.ConfigError`) only when it is read."""
    if isinstance(path, Run):
        return path
    return Run(path.path if isinstance(path, RunDir) else path)
