"""Counts read back from a run directory's tables: skips per (stage, reason) and continuations per verdict.

They are read from what the stages stored, so a resumed run, or ``recovery report RUN``, counts the whole
run and not only the invocation at hand.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from recovery.run_dir.records import (
    CONTINUATIONS_TABLE,
    GRADES_TABLE,
    JUDGE_DISAGREEMENTS_TABLE,
    KEPT_TABLE,
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
    many the LLM judge disagreed on. Grades are outcomes, not skips: a ``no_answer`` was graded."""
    import pyarrow.compute as pc

    counts: Counter = Counter()
    for batch in run.table(GRADES_TABLE).iter_batches(["verdict"]):
        for entry in pc.value_counts(batch.column(0)).to_pylist():
            counts[str(entry["values"])] += entry["counts"]
    disagreements = run.table(JUDGE_DISAGREEMENTS_TABLE).count()
    if disagreements:
        counts["judge_disagrees"] = disagreements
    return dict(sorted(counts.items()))
