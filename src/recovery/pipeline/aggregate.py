"""The aggregate stage: stream grades and continuations into chain outcomes, then corpus statistics.

Only a handful of numbers per chain are held in memory (never the texts), so this scales to the paper's
2.92M chains.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from recovery.metrics import (
    AggregateRow,
    ChainOutcome,
    aggregate,
    continuation_reasoning,
    length_change_from_counts,
)
from recovery.store import RunDir, atomic_write_text
from recovery.types import Verdict

AGGREGATES_FILE = "aggregates.json"
CLEAN_ACCURACY_FILE = "clean_accuracy.json"


def chain_outcomes(run: RunDir) -> list[ChainOutcome]:
    """One `ChainOutcome` per chain that has grades (chains whose gold is unusable are left out)."""
    domains = {r["id"]: r["domain"] for r in run.table("problems").iter_rows(["id", "domain"])}
    correct: dict[str, int] = defaultdict(int)
    graded: dict[str, int] = defaultdict(int)
    unusable: dict[str, int] = defaultdict(int)
    for batch in run.table("grades").iter_batches(["chain_id", "verdict"]):
        for chain_id, verdict in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            graded[chain_id] += 1
            correct[chain_id] += verdict == Verdict.CORRECT.value
            unusable[chain_id] += verdict == Verdict.UNPARSABLE_GOLD.value
    new_chars: dict[str, list[int]] = defaultdict(list)
    for batch in run.table("continuations").iter_batches(["chain_id", "text"]):
        for chain_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            new_chars[chain_id].append(len(continuation_reasoning(text or "")))
    cols = ["id", "problem_id", "model", "intervention", "category", "target_t", "prefix", "inserted_text",
            "original_prefix_chars", "original_reasoning_chars"]  # fmt: skip
    outcomes = []
    for batch in run.table("chains").iter_batches(cols, batch_size=8192):
        for row in batch.to_pylist():
            chain_id = row["id"]
            n = graded.get(chain_id, 0)
            if n == 0 or unusable.get(chain_id, 0) == n:
                continue
            kept = len(row["prefix"]) - len(row["inserted_text"])
            changes = [
                length_change_from_counts(kept, row["original_prefix_chars"], row["original_reasoning_chars"], c)
                for c in new_chars.get(chain_id, [])
            ] if row["original_reasoning_chars"] > 0 else []  # fmt: skip
            remaining = [c.remaining_pct for c in changes if c.remaining_pct is not None]
            outcomes.append(ChainOutcome(
                chain_id=chain_id, model=row["model"], domain=domains.get(row["problem_id"], "unknown"),
                intervention=row["intervention"], category=row["category"], target_t=row["target_t"],
                n=n, k=correct.get(chain_id, 0),
                whole_pct=sum(c.whole_pct for c in changes) / len(changes) if changes else None,
                remaining_pct=sum(remaining) / len(remaining) if remaining else None,
            ))  # fmt: skip
    return outcomes


def stage_aggregate(run: RunDir, *, n_boot: int = 2000, seed: int = 0) -> list[AggregateRow]:
    """Aggregate per (model, domain, intervention, timestep) and write ``aggregates.json`` atomically."""
    rows = aggregate(chain_outcomes(run), n_boot=n_boot, seed=seed)
    atomic_write_text(run.file(AGGREGATES_FILE), json.dumps([_clean(r.flat()) for r in rows], indent=1, sort_keys=True))
    return rows


def read_aggregates(run: RunDir) -> list[dict[str, Any]]:
    """The flat aggregate rows written by `stage_aggregate` (NaN restored from null)."""
    path = run.file(AGGREGATES_FILE)
    if not path.is_file():
        return []
    return [{k: (math.nan if v is None else v) for k, v in row.items()} for row in json.loads(path.read_text())]


def read_clean_accuracy(run: RunDir) -> list[dict[str, Any]]:
    path = run.file(CLEAN_ACCURACY_FILE)
    return json.loads(path.read_text()) if path.is_file() else []


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    # JSON has no NaN: store null so other tools can read the file.
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
