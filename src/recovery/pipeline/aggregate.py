"""The aggregate stage: stream grades and continuations into chain tallies, then corpus statistics.

Texts are never held: grades and continuations are streamed batch by batch into a few numbers per chain,
kept in numpy arrays (about 130 bytes per chain; labels are integer codes). Statistics are then computed
one (model, domain, intervention, timestep) group at a time, so no Python object per chain ever exists
for the whole run: the paper's 2.92M chains fit in a few hundred MB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from recovery.metrics import DEFAULT_GROUP_BY, AggregateRow, ChainOutcome, summarize
from recovery.parallel import available_cpus
from recovery.pipeline.chain_index import ChainIndex
from recovery.prefetch import prefetched
from recovery.run_config import pair_label
from recovery.store import RunDir, atomic_write_text
from recovery.types import Verdict

DEFAULT_THINK_CLOSE = "</think>"
AGGREGATES_FILE = "aggregates.json"
CLEAN_ACCURACY_FILE = "clean_accuracy.json"
LABELS = ("model", "domain", "intervention", "category")


@dataclass
class ChainTallies:
    """Per-chain numbers of a run, column-wise (one entry per scorable chain).

    ``codes[name][i]`` indexes ``values[name]`` for the labels in `LABELS`; lengths are NaN where a chain
    has no length measurement. ``ids`` is an Arrow string array (no Python string per chain).
    """

    ids: Any
    codes: dict[str, Any]
    values: dict[str, list[str]]
    target_t: Any
    n: Any
    k: Any
    whole_pct: Any
    remaining_pct: Any

    def __len__(self) -> int:
        return len(self.n)

    def outcome(self, i: int) -> ChainOutcome:
        """The `ChainOutcome` of chain ``i`` (built on demand)."""
        label = {name: self.values[name][self.codes[name][i]] for name in LABELS}
        whole, remaining = float(self.whole_pct[i]), float(self.remaining_pct[i])
        return ChainOutcome(
            chain_id=self.ids[int(i)].as_py(),
            target_t=float(self.target_t[i]),
            n=int(self.n[i]),
            k=int(self.k[i]),
            whole_pct=None if math.isnan(whole) else whole,
            remaining_pct=None if math.isnan(remaining) else remaining,
            **label,
        )

    def groups(self) -> Iterator[Any]:
        """Chain positions of each (model, domain, intervention, timestep) group, one array per group."""
        import numpy as np

        if not len(self):
            return
        keys = [self.codes["model"], self.codes["domain"], self.codes["intervention"], self.target_t]
        order = np.lexsort(keys[::-1])
        sorted_keys = np.stack([np.asarray(k, dtype=np.float64)[order] for k in keys])
        breaks = np.flatnonzero(np.any(np.diff(sorted_keys, axis=1) != 0, axis=0)) + 1
        yield from np.split(order, breaks)


def think_closers(run: RunDir) -> dict[str, str]:
    """Each model's closing think tag (``</think>``, EXAONE's ``</thought>``), by model name, from the
    conventions of the models in the run's manifest; empty when the run has none."""
    from recovery.pipeline.backend import think_closers as closers_of
    from recovery.pipeline.run import MANIFEST, load_run_config_from_dir

    if not run.file(MANIFEST).is_file():
        return {}
    return closers_of(load_run_config_from_dir(run.path).models)


def chain_tallies(run: RunDir, think_close: Mapping[str, str] | None = None) -> ChainTallies:
    """Grades and continuation lengths of every chain folded into `ChainTallies` (chains without grades, or
    whose gold is unusable, are left out).

    A continuation's reasoning ends at its model's closing think tag: ``think_close`` maps model names to
    tags (default: `think_closers` of the run; ``</think>`` for a model it does not name).

    Column-wise: chain attributes are read once into arrays, then grades and continuations are streamed
    batch by batch and folded into per-chain counts with `numpy.bincount` (the paper's scale is 23M
    continuations, far too many for a Python loop over rows).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    domains = {r["id"]: r["domain"] for r in run.table("problems").iter_rows(["id", "domain"])}
    chains = _chain_arrays(run, domains)
    n_chains = len(chains["id"])
    lookup = ChainIndex(chains["id"])
    graded = np.zeros(n_chains, dtype=np.int32)
    correct = np.zeros(n_chains, dtype=np.int32)
    unusable = np.zeros(n_chains, dtype=np.int32)
    # Batches are read ahead in a thread: Parquet decoding runs without the GIL, beside the folding.
    for batch in prefetched(run.table("grades").iter_batches(["chain_id", "verdict"])):
        index, found = lookup.find(batch.column(0))
        verdict = batch.column(1).filter(found)
        _accumulate(graded, index)
        _accumulate(correct, index, _is(verdict, Verdict.CORRECT))
        _accumulate(unusable, index, _is(verdict, Verdict.UNPARSABLE_GOLD))
    kept, before, total = chains["kept"], chains["original_prefix_chars"], chains["original_reasoning_chars"]
    after = total - before
    n_lengths = np.zeros(n_chains, dtype=np.int32)
    whole_sum = np.zeros(n_chains)
    n_remaining = np.zeros(n_chains, dtype=np.int32)
    remaining_sum = np.zeros(n_chains)
    models = chains["values"]["model"]
    model_code = {name: code for code, name in enumerate(models)}
    continued_by: dict[int, str] = {}  # chain → the other model that continued it (Table 9 swap runs)
    closers = dict(think_closers(run) if think_close is None else think_close)
    for batch in prefetched(run.table("continuations").iter_batches(["chain_id", "text", "model"])):
        index, found = lookup.find(batch.column(0))
        text = pc.fill_null(batch.column(1).filter(found), "")
        continuing = pc.dictionary_encode(pc.fill_null(batch.column(2).filter(found), ""))
        names = continuing.dictionary.to_pylist()
        which = continuing.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        continuing_code = np.array([model_code.get(name, -1) for name in names], dtype=np.int64)[which]
        for k in np.flatnonzero(continuing_code != chains["codes"]["model"][index]):
            continued_by.setdefault(int(index[k]), names[which[k]])
        new = _reasoning_chars(text, [closers.get(name, DEFAULT_THINK_CLOSE) for name in names], which)
        has_total = total[index] > 0
        i = index[has_total]
        _accumulate(n_lengths, i)
        _accumulate(whole_sum, i, 100.0 * ((kept[i] + new[has_total]) - total[i]) / total[i])
        has_after = has_total & (after[index] > 0)
        j = index[has_after]
        _accumulate(n_remaining, j)
        _accumulate(remaining_sum, j, 100.0 * (new[has_after] - after[j]) / after[j])
    codes = chains["codes"]
    if continued_by:  # swap runs: the model label names both models (A→B)
        codes["model"] = codes["model"].copy()
        for c, other_model in continued_by.items():
            codes["model"][c] = _code_of(chains["values"]["model"], pair_label(models[codes["model"][c]], other_model))
    keep = np.flatnonzero((graded > 0) & (unusable < graded))
    with np.errstate(invalid="ignore", divide="ignore"):
        whole_pct = np.where(n_lengths > 0, whole_sum / n_lengths, np.nan)
        remaining_pct = np.where(n_remaining > 0, remaining_sum / n_remaining, np.nan)
    return ChainTallies(
        ids=chains["id"].take(pa.array(keep)),
        codes={name: codes[name][keep] for name in LABELS},
        values=chains["values"],
        target_t=chains["target_t"][keep],
        n=graded[keep],
        k=correct[keep],
        whole_pct=whole_pct[keep],
        remaining_pct=remaining_pct[keep],
    )


def _reasoning_chars(text, closer_of_name: list[str], which) -> Any:
    """Characters of each continuation's reasoning: everything before the first closing tag of the model that
    wrote it (``closer_of_name[which[i]]``, as `recovery.metrics.continuation_reasoning`), counted in
    characters, not bytes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    row_closer = np.array(closer_of_name, dtype=object)[which] if closer_of_name else np.empty(0, dtype=object)
    new = np.zeros(len(text), dtype=np.float64)
    for closer in sorted(set(closer_of_name)):
        mask = row_closer == closer
        if not mask.any():
            continue
        part = text if mask.all() else text.filter(pa.array(mask))
        before_close = pc.list_element(pc.split_pattern(part, closer, max_splits=1), 0)
        new[mask] = pc.utf8_length(before_close).to_numpy(zero_copy_only=False)
    return new


def _accumulate(target, index, weights=None) -> None:
    """``target[index] += weights`` (1 per index without weights), repeated indices adding up.

    A batch's rows belong to a narrow range of chains (continuations are written chain by chain), so the
    counts are taken over that range only, not over every chain of the run.
    """
    import numpy as np

    if not len(index):
        return
    low, high = int(index.min()), int(index.max())
    counts = np.bincount(index - low, weights=weights, minlength=high - low + 1)
    target[low : high + 1] += counts.astype(target.dtype, copy=False)


def chain_outcomes(run: RunDir) -> list[ChainOutcome]:
    """One `ChainOutcome` per chain that has grades (chains whose gold is unusable are left out), in
    stored chain order. Holds a Python object per chain: for small runs (ablations); the aggregate stage
    works group by group instead."""
    tallies = chain_tallies(run)
    return [tallies.outcome(i) for i in range(len(tallies))]


def aggregate_tallies(tallies: ChainTallies, *, n_boot: int = 2000, seed: int = 0) -> list[AggregateRow]:
    """The rows of `recovery.metrics.aggregate` by (model, domain, intervention, timestep), computed from
    the arrays one group at a time: robustness levels are vectorised (K ≥ 1, K ≥ ⌊N/2⌋+1, K = N) and each
    group's values keep stored chain order, so the statistics, bootstrap intervals included, are exactly
    those of aggregating every `ChainOutcome` at once."""
    import numpy as np

    def group_row(members) -> AggregateRow:
        first = members[0]
        key = {name: tallies.values[name][tallies.codes[name][first]] for name in ("model", "domain", "intervention")}
        key["target_t"] = float(tallies.target_t[first])
        k, n = tallies.k[members], tallies.n[members]
        whole, remaining = tallies.whole_pct[members], tallies.remaining_pct[members]
        samples = (k >= 1, k >= n // 2 + 1, k == n, whole[~np.isnan(whole)], remaining[~np.isnan(remaining)])
        stats = [summarize(np.asarray(v, dtype=float), n_boot=n_boot, seed=seed) for v in samples]
        return AggregateRow({b: key[b] for b in DEFAULT_GROUP_BY}, len(members), *stats)

    # Groups in threads: the bootstrap's draws, gathers and sums run in NumPy without the GIL, and each
    # summary seeds its own generator, so the rows do not depend on the threads.
    with ThreadPoolExecutor(max_workers=max(1, min(available_cpus(), 8))) as pool:
        rows = list(pool.map(group_row, tallies.groups()))
    rows.sort(key=lambda r: tuple(str(r.key[b]) for b in DEFAULT_GROUP_BY))
    return rows


def _code_of(values: list[str], label: str) -> int:
    """The code of ``label`` in ``values`` (appended when new)."""
    try:
        return values.index(label)
    except ValueError:
        values.append(label)
        return len(values) - 1


def _chain_arrays(run: RunDir, domains: dict[str, str]) -> dict[str, Any]:
    """The chain attributes aggregation needs, as arrays: ids (Arrow strings), labels as integer codes
    into small lists of distinct values, numbers as float64.

    ``kept`` is the intervened prefix without the inserted text, in characters: the stored ``kept_chars``,
    or for chains stored before that column existed, computed from prefixes read batch by batch and
    dropped, so their text is never held all at once.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    numbers = ("target_t", "original_prefix_chars", "original_reasoning_chars")
    values: dict[str, list[str]] = {name: [] for name in LABELS}
    index_of: dict[str, dict[str, int]] = {name: {} for name in LABELS}
    ids: list = []
    codes: dict[str, list] = {name: [] for name in LABELS}
    parts: dict[str, list] = {name: [] for name in (*numbers, "kept")}
    table = run.table("chains")
    # Chains written before ``kept_chars`` was stored have it recomputed from their texts.
    stored_kept = table.has_column("kept_chars")
    texts = ["kept_chars"] if stored_kept else ["prefix", "inserted_text"]
    columns = ["id", "problem_id", "model", "intervention", "category", *numbers, *texts]
    for batch in table.iter_batches(columns, batch_size=8192):
        ids.append(batch.column("id"))
        for name in LABELS:
            source = batch.column("problem_id" if name == "domain" else name)
            encoded = pc.dictionary_encode(pc.fill_null(source, ""))
            if isinstance(encoded, pa.ChunkedArray):
                encoded = encoded.combine_chunks()
            distinct = encoded.dictionary.to_pylist()
            if name == "domain":
                distinct = [domains.get(problem_id, "unknown") for problem_id in distinct]
            mapping = np.array([index_of[name].setdefault(v, len(index_of[name])) for v in distinct], dtype=np.int32)
            codes[name].append(
                mapping[encoded.indices.to_numpy(zero_copy_only=False)]
                if len(distinct)
                else np.empty(0, dtype=np.int32)
            )
        for name in numbers:
            parts[name].append(batch.column(name).to_numpy(zero_copy_only=False).astype(np.float64))
        if stored_kept:
            kept = batch.column("kept_chars")
        else:
            kept = pc.subtract(
                pc.utf8_length(pc.fill_null(batch.column("prefix"), "")),
                pc.utf8_length(pc.fill_null(batch.column("inserted_text"), "")),
            )
        parts["kept"].append(kept.to_numpy(zero_copy_only=False).astype(np.float64))
    for name in LABELS:
        values[name] = list(index_of[name])
    arrays: dict[str, Any] = {
        "id": pa.concat_arrays(ids) if ids else pa.array([], type=pa.string()),
        "values": values,
        "codes": {name: np.concatenate(c) if c else np.empty(0, dtype=np.int32) for name, c in codes.items()},
    }
    for name, chunks in parts.items():
        arrays[name] = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.float64)
    return arrays


def _is(verdicts, verdict: Verdict):
    """1.0 where the Arrow array ``verdicts`` equals ``verdict``, else 0.0 (a bincount weight)."""
    import pyarrow.compute as pc

    return pc.equal(verdicts, verdict.value).to_numpy(zero_copy_only=False).astype(float)


def stage_aggregate(
    run: RunDir, *, n_boot: int = 2000, seed: int = 0, think_close: Mapping[str, str] | None = None
) -> list[AggregateRow]:
    """Aggregate per (model, domain, intervention, timestep) and write ``aggregates.json`` atomically
    (``think_close``: see `chain_tallies`)."""
    rows = aggregate_tallies(chain_tallies(run, think_close), n_boot=n_boot, seed=seed)
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
