"""The aggregate stage: stream grades and continuations into chain outcomes, then corpus statistics.

Texts are never held: grades and continuations are streamed batch by batch into a few numbers per chain.
The chain labels and one `ChainOutcome` per chain are held, which grows with the run (bench/pipeline_scale.py
measured 1.22 GB peak for 1M chains over the whole pipeline).
"""

from __future__ import annotations

import functools
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
    lookup = ChainIndex(ids)
    graded = np.zeros(n_chains, dtype=np.int64)
    correct = np.zeros(n_chains, dtype=np.int64)
    unusable = np.zeros(n_chains, dtype=np.int64)
    for batch in run.table("grades").iter_batches(["chain_id", "verdict"]):
        index, found = lookup.find(batch.column(0))
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
        index, found = lookup.find(batch.column(0))
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
    """The chain attributes aggregation needs: ids and labels as Python lists, numbers as numpy arrays.

    ``kept`` is the intervened prefix without the inserted text, in characters; prefixes are read batch
    by batch and dropped, so their text is never held all at once. Repeated labels (model, intervention,
    …) share one string object each: a million chains hold a handful of distinct labels.
    """
    import numpy as np
    import pyarrow.compute as pc

    labels = ("problem_id", "model", "intervention", "category")
    numbers = ("target_t", "original_prefix_chars", "original_reasoning_chars")
    ids: list[str] = []
    out: dict[str, list] = {name: [] for name in labels}
    parts: dict[str, list] = {name: [] for name in (*numbers, "kept")}
    shared: dict[str, str] = {}
    for batch in run.table("chains").iter_batches(["id", *labels, *numbers, "prefix", "inserted_text"], batch_size=8192):
        ids.extend(batch.column("id").to_pylist())
        for name in labels:
            out[name].extend(shared.setdefault(v, v) for v in batch.column(name).to_pylist())
        for name in numbers:
            parts[name].append(batch.column(name).to_numpy(zero_copy_only=False).astype(np.float64))
        kept = pc.subtract(pc.utf8_length(pc.fill_null(batch.column("prefix"), "")),
                           pc.utf8_length(pc.fill_null(batch.column("inserted_text"), "")))  # fmt: skip
        parts["kept"].append(kept.to_numpy(zero_copy_only=False).astype(np.float64))
    arrays: dict[str, Any] = {"id": ids, **out}
    for name, chunks in parts.items():
        arrays[name] = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.float64)
    return arrays


class ChainIndex:
    """Positions of chain ids in the chains table, for whole Arrow columns of ids at a time.

    Built once per aggregation (a hash set rebuilt per batch would make the stage quadratic in the number
    of chains). Content-addressed ids are 16 hex characters: they are decoded to uint64 without a Python
    loop and found by binary search; a column holding any other id is looked up in a dict instead.
    """

    def __init__(self, ids: list[str]) -> None:
        import numpy as np
        import pyarrow as pa

        self._ids = ids
        self._dict: dict[str, int] | None = None
        keys = _hex16_keys(pa.array(ids, type=pa.string()))
        self._order = None if keys is None else np.argsort(keys, kind="stable")
        self._sorted = None if keys is None else keys[self._order]

    def find(self, chain_ids):
        """(positions of the ids that are chains, boolean Arrow mask of those ids) for an Arrow string array."""
        import numpy as np
        import pyarrow as pa

        keys = _hex16_keys(chain_ids) if self._sorted is not None else None
        if keys is None:
            if self._dict is None:
                self._dict = {chain_id: i for i, chain_id in enumerate(self._ids)}
            values = chain_ids.to_pylist()
            found = np.array([v in self._dict for v in values], dtype=bool)
            index = np.array([self._dict[v] for v, f in zip(values, found) if f], dtype=np.int64)
            return index, pa.array(found)
        if not self._sorted.size:
            return np.empty(0, dtype=np.int64), pa.array(np.zeros(len(keys), dtype=bool))
        pos = np.minimum(np.searchsorted(self._sorted, keys), self._sorted.size - 1)
        found = self._sorted[pos] == keys
        return self._order[pos[found]].astype(np.int64), pa.array(found)


@functools.cache
def _hex_nibbles():
    """Byte → hex digit value (255 for bytes that are not lowercase hex digits)."""
    import numpy as np

    table = np.full(256, 255, dtype=np.uint8)
    for value, char in enumerate("0123456789abcdef"):
        table[ord(char)] = value
    return table


def _hex16_keys(array):
    """uint64 values of an Arrow string array whose every value is 16 lowercase hex characters, else None."""
    import numpy as np
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count or array.type not in (pa.string(), pa.large_string()):
        return None
    if len(array) == 0:
        return np.empty(0, dtype=np.uint64)
    offset_type = np.int32 if array.type == pa.string() else np.int64
    offsets = np.frombuffer(array.buffers()[1], dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    if not np.all(np.diff(offsets) == 16):
        return None
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(-1, 16)
    nibbles = _hex_nibbles()[data]
    if (nibbles > 15).any():
        return None
    keys = np.zeros(len(array), dtype=np.uint64)
    for column in range(16):
        keys = (keys << np.uint64(4)) | nibbles[:, column].astype(np.uint64)
    return keys


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
