"""The aggregate stage: stream grades and continuations into chain outcomes, then corpus statistics.

Only a handful of numbers per chain are held in memory (never the texts), so this scales to the paper's
2.92M chains.
"""

from __future__ import annotations

import json
import math
from typing import Any

from recovery.metrics import (
    AggregateRow,
    ChainOutcome,
    aggregate,
)
from recovery.pipeline.swap import pair_label
from recovery.store import RunDir, atomic_write_text
from recovery.types import Verdict

AGGREGATES_FILE = "aggregates.json"
CLEAN_ACCURACY_FILE = "clean_accuracy.json"


def chain_outcomes(run: RunDir) -> list[ChainOutcome]:
    """One `ChainOutcome` per chain that has grades (chains whose gold is unusable are left out).

    Column-wise: chain attributes are read once into arrays, then grades and continuations are streamed
    batch by batch and folded into per-chain counts with `numpy.bincount` (the paper's scale is 23M
    continuations, far too many for a Python loop over rows).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    domains = {r["id"]: r["domain"] for r in run.table("problems").iter_rows(["id", "domain"])}
    chains = _chain_arrays(run)
    ids = chains["id"]
    n_chains = len(ids)
    graded = np.zeros(n_chains, dtype=np.int64)
    correct = np.zeros(n_chains, dtype=np.int64)
    unusable = np.zeros(n_chains, dtype=np.int64)
    for batch in run.table("grades").iter_batches(["chain_id", "verdict"]):
        index, found = _chain_index(batch.column(0), ids)
        verdict = batch.column(1).filter(found)
        graded += np.bincount(index, minlength=n_chains)
        correct += np.bincount(index, weights=_is(verdict, Verdict.CORRECT), minlength=n_chains).astype(np.int64)
        unusable += np.bincount(index, weights=_is(verdict, Verdict.UNPARSABLE_GOLD), minlength=n_chains).astype(np.int64)
    kept, before, total = chains["kept"], chains["original_prefix_chars"], chains["original_reasoning_chars"]
    after = total - before
    n_lengths = np.zeros(n_chains, dtype=np.int64)
    whole_sum = np.zeros(n_chains)
    n_remaining = np.zeros(n_chains, dtype=np.int64)
    remaining_sum = np.zeros(n_chains)
    chain_models = pa.array(chains["model"], type=pa.string())
    continued_by: dict[int, str] = {}  # chain → the other model that continued it (Table 9 swap runs)
    for batch in run.table("continuations").iter_batches(["chain_id", "text", "model"]):
        index, found = _chain_index(batch.column(0), ids)
        text = pc.fill_null(batch.column(1).filter(found), "")
        other = pc.not_equal(batch.column(2).filter(found), chain_models.take(pa.array(index)))
        for k in np.flatnonzero(pc.fill_null(other, False).to_numpy(zero_copy_only=False)):
            continued_by.setdefault(int(index[k]), batch.column(2).filter(found)[int(k)].as_py())
        # Characters of the continuation's reasoning: everything before the first closing tag (as
        # `continuation_reasoning`), counted in characters, not bytes.
        before_close = pc.list_element(pc.split_pattern(text, "</think>", max_splits=1), 0)
        new = pc.utf8_length(before_close).to_numpy(zero_copy_only=False).astype(np.float64)
        has_total = total[index] > 0
        i = index[has_total]
        whole = 100.0 * ((kept[i] + new[has_total]) - total[i]) / total[i]
        n_lengths += np.bincount(i, minlength=n_chains)
        whole_sum += np.bincount(i, weights=whole, minlength=n_chains)
        has_after = has_total & (after[index] > 0)
        j = index[has_after]
        remaining = 100.0 * (new[has_after] - after[j]) / after[j]
        n_remaining += np.bincount(j, minlength=n_chains)
        remaining_sum += np.bincount(j, weights=remaining, minlength=n_chains)
    outcomes = []
    for c in np.flatnonzero((graded > 0) & (unusable < graded)):
        outcomes.append(ChainOutcome(
            chain_id=ids[c], model=pair_label(chains["model"][c], continued_by.get(int(c))), domain=domains.get(chains["problem_id"][c], "unknown"),
            intervention=chains["intervention"][c], category=chains["category"][c],
            target_t=float(chains["target_t"][c]), n=int(graded[c]), k=int(correct[c]),
            whole_pct=float(whole_sum[c] / n_lengths[c]) if n_lengths[c] else None,
            remaining_pct=float(remaining_sum[c] / n_remaining[c]) if n_remaining[c] else None,
        ))  # fmt: skip
    return outcomes


def _chain_arrays(run: RunDir) -> dict[str, Any]:
    """The chain attributes aggregation needs, as Python lists (labels) and numpy arrays (lengths).

    ``kept`` is the intervened prefix without the inserted text, in characters; prefixes are read batch
    by batch and dropped, so their text is never held all at once.
    """
    import numpy as np
    import pyarrow.compute as pc

    labels = ("id", "problem_id", "model", "intervention", "category", "target_t")
    numbers = ("original_prefix_chars", "original_reasoning_chars")
    out: dict[str, list] = {name: [] for name in (*labels, *numbers, "kept")}
    for batch in run.table("chains").iter_batches([*labels, *numbers, "prefix", "inserted_text"], batch_size=8192):
        for name in (*labels, *numbers):
            out[name].extend(batch.column(name).to_pylist())
        kept = pc.subtract(pc.utf8_length(pc.fill_null(batch.column("prefix"), "")),
                           pc.utf8_length(pc.fill_null(batch.column("inserted_text"), "")))  # fmt: skip
        out["kept"].extend(kept.to_pylist())
    arrays: dict[str, Any] = {name: out[name] for name in labels}
    for name in (*numbers, "kept"):
        arrays[name] = np.asarray(out[name], dtype=np.float64)
    return arrays


def _chain_index(chain_ids, ids: list[str]):
    """Positions of ``chain_ids`` (an Arrow array) in ``ids``, and the mask of those found there."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    index = pc.index_in(chain_ids, value_set=pa.array(ids, type=pa.string()))
    found = pc.is_valid(index)
    return index.filter(found).to_numpy(zero_copy_only=False).astype(np.int64), found


def _is(verdicts, verdict: Verdict):
    """1.0 where the Arrow array ``verdicts`` equals ``verdict``, else 0.0 (a bincount weight)."""
    import pyarrow.compute as pc

    return pc.equal(verdicts, verdict.value).to_numpy(zero_copy_only=False).astype(float)


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
