"""What a before/after comparison reads from one run: per-chain outcomes with their problem, and
per-problem clean outcomes, so two runs can be paired chain by chain and problem by problem.

`RunOutcomes.load` reads a run directory (chain tallies of the aggregate stage, the chains' problem ids,
the filter's verdict per trace); `RunOutcomes.from_records` builds one from plain dicts. Columns are
numpy arrays, one entry per scorable chain (or per trace for the clean outcomes).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recovery.report.data import category_of
from recovery.run_dir import Run, chain_tallies, open_run

CHAIN_FIELDS: tuple[str, ...] = (
    "model",
    "domain",
    "intervention",
    "category",
    "target_t",
    "problem_id",
    "n",
    "k",
    "whole_pct",
)
CLEAN_FIELDS: tuple[str, ...] = ("model", "domain", "problem_id", "correct")
# Filter reasons that mean a trace was not correct: the filter stage tests closure, then correctness, and
# records the first reason that dropped a trace (later reasons, such as the longest fraction, were correct).
NOT_CORRECT: tuple[str, ...] = ("no_closing_think_tag", "not_correct")
_KINDS = {"target_t": float, "n": np.int64, "k": np.int64, "whole_pct": float, "correct": bool}


@dataclass(frozen=True)
class RunOutcomes:
    """Chain-level and problem-level outcomes of one run.

    ``chains``: columns `CHAIN_FIELDS` (``whole_pct`` NaN where a chain has no length measurement).
    ``clean``: columns `CLEAN_FIELDS`, one entry per original trace; empty when the run does not say which
    traces were correct (no filter stage, or ``filters.require_correct`` off).
    ``clean_summary``: the run's clean accuracy per (model, domain): dicts with ``n`` and ``accuracy``.
    ``meta``: run metadata as the run report shows it.
    """

    chains: Mapping[str, np.ndarray]
    clean: Mapping[str, np.ndarray]
    clean_summary: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, columns, fields in (("chains", self.chains, CHAIN_FIELDS), ("clean", self.clean, CLEAN_FIELDS)):
            missing = [f for f in fields if f not in columns]
            if missing:
                raise ValueError(f"{name} columns lack {missing}")
            lengths = {len(columns[f]) for f in fields}
            if len(lengths) > 1:
                raise ValueError(f"{name} columns differ in length: {sorted(lengths)}")

    def __len__(self) -> int:
        return len(self.chains["n"])

    def models(self) -> list[str]:
        """Every model with chains or clean outcomes, in first-seen order."""
        names = [
            *self.chains["model"].tolist(),
            *self.clean["model"].tolist(),
            *(str(c["model"]) for c in self.clean_summary),
        ]
        return list(dict.fromkeys(names))

    @classmethod
    def from_records(
        cls,
        chains: Iterable[Mapping[str, Any]] = (),
        clean: Iterable[Mapping[str, Any]] = (),
        *,
        clean_summary: Iterable[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> RunOutcomes:
        """Build from dicts: ``chains`` with `CHAIN_FIELDS` (``category`` defaults to the registry's,
        ``whole_pct`` to missing), ``clean`` with `CLEAN_FIELDS`. Without ``clean_summary`` it is
        computed from ``clean``."""

        chain_rows = [dict(r) for r in chains]
        for r in chain_rows:
            r.setdefault("category", category_of(str(r["intervention"])))
            if r.get("whole_pct") is None:
                r["whole_pct"] = math.nan
        clean_rows = [dict(r) for r in clean]
        summary = _summary_of(clean_rows) if clean_summary is None else [dict(c) for c in clean_summary]
        return cls(
            _columns(chain_rows, CHAIN_FIELDS), _columns(clean_rows, CLEAN_FIELDS), tuple(summary), dict(meta or {})
        )

    @classmethod
    def load(cls, run_dir: str | os.PathLike) -> RunOutcomes:
        """Read a run directory written by the pipeline (chains need the grades stage; clean outcomes the
        filter stage). Raises `recovery.configs.ConfigError` when ``run_dir`` is not a run directory."""
        from recovery.report.run_report import run_report_data  # lazy: loads matplotlib

        run = open_run(run_dir)
        config = run.config
        summary = tuple(run.clean_accuracy())
        clean = _load_clean(run, summary) if config.traces.filters.require_correct else _columns([], CLEAN_FIELDS)
        return cls(_load_chains(run), clean, summary, dict(run_report_data(run, config).meta))


def _columns(rows: list[Mapping[str, Any]], fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    out = {}
    for f in fields:
        kind = _KINDS.get(f)
        if kind is None:
            out[f] = objects([str(r[f]) for r in rows])
        else:
            out[f] = np.array([kind(r[f]) for r in rows], dtype=kind)
    return out


def objects(values: list[Any]) -> np.ndarray:
    """A 1-D object array of ``values`` (``np.array`` would make strings a fixed-width string array)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _summary_of(clean_rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in clean_rows:
        cell = cells[(str(r["model"]), str(r["domain"]))]
        cell[0] += 1
        cell[1] += bool(r["correct"])
    return [{"model": m, "domain": d, "n": n, "accuracy": k / n} for (m, d), (n, k) in sorted(cells.items())]


def _load_chains(run: Run) -> dict[str, np.ndarray]:
    """Chain tallies of the aggregate stage plus each chain's problem id (read from the chains table)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tallies = chain_tallies(run)
    ids, problems = [], []
    for batch in run.chain_batches(["id", "problem_id"]):
        ids.append(batch.column(0))
        problems.append(batch.column(1))
    out: dict[str, np.ndarray] = {}
    for name in ("model", "domain", "intervention", "category"):
        out[name] = objects(list(tallies.values[name]))[np.asarray(tallies.codes[name], dtype=np.int64)]
    if len(tallies):
        position = pc.index_in(tallies.ids, value_set=pa.concat_arrays(ids))
        out["problem_id"] = objects(pa.concat_arrays(problems).take(position).to_pylist())
    else:
        out["problem_id"] = objects([])
    out["target_t"] = np.asarray(tallies.target_t, dtype=float)
    out["n"] = np.asarray(tallies.n, dtype=np.int64)
    out["k"] = np.asarray(tallies.k, dtype=np.int64)
    out["whole_pct"] = np.asarray(tallies.whole_pct, dtype=float)
    return out


def _load_clean(run: Run, summary: tuple[Mapping[str, Any], ...]) -> dict[str, np.ndarray]:
    """Whether each original trace was correct, from the filter's verdicts, when they agree with the
    run's stored clean accuracy (otherwise the verdicts cannot be read that way and nothing is returned)."""
    if not run.tables.kept.exists():
        return _columns([], CLEAN_FIELDS)
    domains = {r["id"]: r["domain"] for r in run.problem_rows(["id", "domain"])}
    rows = [
        {
            "model": r["model"],
            "domain": domains.get(r["problem_id"], "unknown"),
            "problem_id": r["problem_id"],
            "correct": r["reason"] not in NOT_CORRECT,
        }
        for r in run.kept_rows(["model", "problem_id", "reason"])
    ]
    stored = {(str(c["model"]), str(c["domain"])): (int(c["n"]), float(c["accuracy"])) for c in summary}
    derived = {(c["model"], c["domain"]): (c["n"], c["accuracy"]) for c in _summary_of(rows)}
    agrees = set(stored) == set(derived) and all(
        stored[key][0] == n and math.isclose(stored[key][1], acc, abs_tol=1e-9) for key, (n, acc) in derived.items()
    )
    return _columns(rows if agrees else [], CLEAN_FIELDS)
