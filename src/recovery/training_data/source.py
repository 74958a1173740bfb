"""Reading a benchmark run directory into the records the dataset builders join.

The pipeline writes one Parquet table per stage (see `recovery.run_dir`); the builders need them
joined: each intervened chain with its problem, its original trace and its graded continuations. This
module does that join once, in memory, keyed by the content-addressed ids the tables share.

Memory grows with the run (all continuation texts are held); a run of a few hundred thousand
continuations fits comfortably. Larger runs can be exported per model with ``models=``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.plan import protocol_label
from recovery.run_config import RunConfig
from recovery.run_dir import Run, open_run, records
from recovery.segment import SegmentationError
from recovery.types import Intervened, Problem, Trace


@dataclass(frozen=True, slots=True)
class GradedContinuation:
    """One stored continuation with its stored grade (``verdict`` is None when it was never graded)."""

    id: str
    chain_id: str
    sample_index: int
    text: str
    model: str
    n_tokens: int | None
    finish_reason: str | None
    verdict: str | None
    extracted: str | None

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"


@dataclass
class RunData:
    """A run directory's tables, joined by id, beside the `recovery.run_dir.Run` they were read from (its path,
    manifest and config are that run's). ``kept`` maps trace id → (kept, reason) from the benchmark's trace
    filter; ``continuations`` maps chain id → its samples in sample order.
    """

    run: Run
    problems: dict[str, Problem] = field(default_factory=dict)
    traces: dict[str, Trace] = field(default_factory=dict)
    trace_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    kept: dict[str, tuple[bool, str]] = field(default_factory=dict)
    chains: list[Intervened] = field(default_factory=list)
    continuations: dict[str, list[GradedContinuation]] = field(default_factory=dict)
    unparsable_traces: int = 0

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as stored (`recovery.run_dir.Run.manifest`): cards describe and hash the run as it was
        written, also when its config no longer validates against the current `RunConfig`."""
        return self.run.manifest

    @property
    def config(self) -> RunConfig:
        """The run's `RunConfig` (`recovery.run_dir.Run.config`): what rebuilds its prompts and grading."""
        return self.run.config

    @property
    def models(self) -> list[str]:
        """Model names in the order the manifest lists them (then any others found in the traces)."""
        named = [m.get("name") for m in self.manifest.get("models", []) if isinstance(m, Mapping)]
        seen = [m for m in named if m]
        for trace in self.traces.values():
            if trace.model not in seen:
                seen.append(trace.model)
        return seen

    def clean_traces(self, models: Iterable[str] | None = None) -> list[Trace]:
        """Original traces fit to imitate: those the benchmark's filter kept (closed and correct by
        default); without a ``kept`` table, every closed trace. Sorted by id (deterministic)."""
        wanted = set(models) if models is not None else None
        out = []
        for trace in self.traces.values():
            if wanted is not None and trace.model not in wanted:
                continue
            ok = self.kept.get(trace.id, (False, ""))[0] if self.kept else trace.closed
            if ok and trace.problem_id in self.problems:
                out.append(trace)
        return sorted(out, key=lambda t: t.id)

    @property
    def protocol(self) -> str:
        """Whose protocol the run followed, as reports name it (`recovery.plan.protocol_label`); a manifest
        without the key is a run of the project's protocol."""

        parts = self.manifest.get("protocol_parts")
        return protocol_label(self.manifest.get("protocol") or "default", parts if isinstance(parts, Mapping) else None)

    def config_section(self, name: str) -> dict[str, Any]:
        """Section ``name`` of the manifest as stored (empty when it has none)."""
        value = self.manifest.get(name)
        return dict(value) if isinstance(value, Mapping) else {}


def load_run(run_dir: str | Path | RunData, *, models: Iterable[str] | None = None) -> RunData:
    """Read ``run_dir`` (a `RunData` is returned as is). ``models`` restricts traces, chains and
    continuations to those models."""
    if isinstance(run_dir, RunData):
        return run_dir
    run = open_run(run_dir)
    # Without its manifest a folder is not a run: reading it would export empty datasets as if complete.
    wanted = set(models) if models is not None else None
    data = RunData(run)
    data.problems.update(run.problems())
    for row in run.trace_rows():
        if wanted is not None and row["model"] not in wanted:
            continue
        try:
            trace = run.parse_trace(row)
        except SegmentationError:
            data.unparsable_traces += 1
            continue
        data.traces[trace.id] = trace
        data.trace_info[trace.id] = {k: row.get(k) for k in ("n_tokens", "finish_reason")}
    for row in run.kept_rows(["id", "kept", "reason"]):
        data.kept[row["id"]] = (bool(row["kept"]), row["reason"])
    for row in run.chain_rows():
        if wanted is not None and row["model"] not in wanted:
            continue
        data.chains.append(records.chain_from_row(row))
    grades = {row["id"]: row for row in run.grade_rows(["id", "verdict", "extracted"])}
    for row in run.continuation_rows():
        if wanted is not None and row["model"] not in wanted:
            continue
        grade = grades.get(row["id"], {})
        data.continuations.setdefault(row["chain_id"], []).append(
            GradedContinuation(
                id=row["id"],
                chain_id=row["chain_id"],
                sample_index=int(row["sample_index"]),
                text=row["text"] or "",
                model=row["model"],
                n_tokens=row.get("n_tokens"),
                finish_reason=row.get("finish_reason"),
                verdict=grade.get("verdict"),
                extracted=grade.get("extracted"),
            )
        )
    for samples in data.continuations.values():
        samples.sort(key=lambda c: c.sample_index)
    return data
