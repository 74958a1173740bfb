"""Counts read back from a run directory's tables: skips per (stage, reason), continuations per verdict, and
ids stored twice.

They are read from what the stages stored, so a resumed run, or ``recovery report RUN``, counts the whole
run and not only the invocation at hand.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from recovery.configs import ConfigError
from recovery.run_dir.records import (
    CONTINUATIONS_TABLE,
    GRADES_TABLE,
    JUDGE_DISAGREEMENTS_TABLE,
    KEPT_TABLE,
    KEYED_TABLES,
    SKIPS_TABLE,
)
from recovery.store import RunDir

# A chain whose continuations could not be generated (retried by the next run).
GENERATION_ERROR = "generation_error"
# Skips only the invocation that met them counts: failures the next run retries, so nothing is stored.
TRANSIENT_SKIPS = frozenset({("traces", GENERATION_ERROR), ("grades", "grading_alongside_failed")})


def summary_skips(run: RunDir, counts: Counter) -> list[dict[str, Any]]:
    """Skips over the whole run, read back from what the stages stored (the ``skips`` table and the filter's
    ``kept`` table), plus this invocation's transient failures (``counts``, by (stage, reason)), which are
    retried rather than stored. A chain whose generation failed counts only while it still has no
    continuations."""
    stored: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    continued = None
    for row in run.table(SKIPS_TABLE).iter_rows(["id", "stage", "item", "reason"]):
        if (row["id"], row["reason"]) in seen:
            continue
        seen.add((row["id"], row["reason"]))
        if row["stage"] == "continuations" and row["reason"] == GENERATION_ERROR:
            if continued is None:
                continued = run.table(CONTINUATIONS_TABLE).keys("chain_id")
            if row["item"] in continued:
                continue
        stored[(row["stage"], row["reason"])] += 1
    for row in run.table(KEPT_TABLE).iter_rows(["kept", "reason"]):
        if not row["kept"]:
            stored[("filter", row["reason"])] += 1
    for key, count in counts.items():
        if key in TRANSIENT_SKIPS:
            stored[key] += count
    return [{"stage": s, "reason": r, "count": c} for (s, r), c in sorted(stored.items())]


def grade_verdicts(run: RunDir) -> dict[str, int]:
    """How many continuations got each verdict (correct, wrong, no_answer …), from the grades table, and how
    many the LLM judge disagreed on. Grades are outcomes, not skips: a ``no_answer`` was graded. Each
    continuation counts once, by its id, whatever the table holds (its first stored grade)."""
    import pyarrow.compute as pc

    ids, verdicts = _columns(run, GRADES_TABLE, ["id", "verdict"])
    counts: Counter = Counter()
    if ids is not None:
        for entry in pc.value_counts(verdicts.take(_first_of_each(ids))).to_pylist():
            counts[str(entry["values"])] += entry["counts"]
    disagreements = run.table(JUDGE_DISAGREEMENTS_TABLE).count()
    if disagreements:
        counts["judge_disagrees"] = disagreements
    return dict(sorted(counts.items()))


def duplicated_ids(run: RunDir, table: str) -> int:
    """How many rows of ``table`` repeat an id an earlier row already has (0 in a sound run directory)."""
    import pyarrow.compute as pc

    (ids,) = _columns(run, table, ["id"])
    return 0 if ids is None else len(ids) - pc.count_distinct(ids).as_py()


def refuse_duplicated_ids(run: RunDir) -> None:
    """Raise `ConfigError` in one line when a table keyed by id holds an id twice (two processes wrote the
    run before it was locked, or an older version graded a regenerated shard again): every count over it
    would be wrong, and resuming would carry that forward."""
    for table in KEYED_TABLES:
        repeated = duplicated_ids(run, table)
        if repeated:
            raise ConfigError(
                f"{run.path / table} holds {repeated} rows whose id is stored twice (two processes wrote this run, "
                f"or an older version did); delete {run.path / table} and resume: its rows are made again"
            )


def _columns(run: RunDir, table: str, names: list[str]) -> list:
    """``names`` of every row of ``table`` as one Arrow array each (None each when the table is empty)."""
    import pyarrow as pa

    parts: list[list] = [[] for _ in names]
    for batch in run.table(table).iter_batches(names):
        for i in range(len(names)):
            parts[i].append(batch.column(i))
    if not parts[0]:
        return [None] * len(names)
    return [pa.chunked_array(p).combine_chunks() for p in parts]


def _first_of_each(ids):
    """Positions of the first row of each distinct value of ``ids``, as an Arrow array."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(codes, return_index=True)
    return pa.array(np.sort(first))
