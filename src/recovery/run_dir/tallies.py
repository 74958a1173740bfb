"""Per-chain tallies of a run: grades and continuation lengths streamed from the tables into a few numbers per
chain (K of N correct, mean length changes), the input of the aggregate stage and of run comparisons.

Texts are never held: grades and continuations are streamed batch by batch and folded into numpy arrays
(a few numbers per chain; labels are integer codes), with the paper's definitions applied column-wise
(`recovery.metrics`), so a run of the paper's size fits in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from recovery.metrics import ChainOutcome, length_change_pct, reasoning_lengths
from recovery.plan import LengthMeasure
from recovery.prefetch import prefetched
from recovery.run_config import ThinkTagsOf, pair_label, think_closers
from recovery.run_dir.chain_index import ChainIndex
from recovery.run_dir.files import is_run_dir
from recovery.run_dir.records import CHAINS_TABLE, CONTINUATIONS_TABLE, GRADES_TABLE, PROBLEMS_TABLE
from recovery.run_dir.reference_lengths import ReferenceLengths, reference_chain_lengths
from recovery.run_dir.run import open_run
from recovery.store import RunDir
from recovery.types import Verdict

LABELS = ("model", "domain", "intervention", "category")
# Coded per chain besides the labels: the chain's problem, the unit of sampling of its intervals.
CODED = (*LABELS, "problem")


@dataclass
class ChainTallies:
    """Per-chain numbers of a run, column-wise (one entry per scorable chain).

    ``codes[name][i]`` indexes ``values[name]`` for the labels in `LABELS` and the chain's ``problem``;
    lengths are NaN where a chain has no length measurement. ``ids`` is an Arrow string array (no Python string per chain).
    """

    ids: Any
    codes: dict[str, Any]
    values: dict[str, list[str]]
    target_t: Any
    n: Any
    k: Any
    whole_pct: Any
    remaining_pct: Any
    completions: CompletionLengths | None = None

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
            problem_id=self.values["problem"][self.codes["problem"][i]],
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


@dataclass
class CompletionLengths:
    """Each measured continuation's own length change, kept under the authors' length measure (``protocol:
    reference``): their group mean is the mean over completions (scripts/length_overhead.py, pandas
    ``mean`` of ``percent_change``), not the mean of per-chain means, and a float sum depends on its order.

    ``chain`` indexes the tallies' chains, ``order`` is the authors' row order (their traces file, i.e. the
    run's problems, then the completion index), ``pct`` the change in percent.
    """

    chain: Any
    order: Any
    pct: Any

    def __post_init__(self) -> None:
        import numpy as np

        # The completions of chain c are by_chain[starts[c]:starts[c + 1]]: found once, not searched per group.
        self._by_chain = np.argsort(self.chain, kind="stable")
        chains = int(self.chain.max()) + 1 if len(self.chain) else 0
        self._starts = np.searchsorted(self.chain[self._by_chain], np.arange(chains + 1))

    def group_mean_std(self, members: Any) -> tuple[float, float]:
        """The mean and population std of the change over every completion of the chains ``members``, in the
        authors' row order and operations (pandas ``mean`` and ``std(ddof=0)`` of a float column: a NumPy
        pairwise sum over the count, then the root of the mean squared difference); NaN when none was
        measured."""
        import numpy as np

        last = len(self._starts) - 1
        ranges = [self._by_chain[self._starts[c] : self._starts[c + 1]] for c in members if c < last]
        mine = np.concatenate(ranges) if ranges else np.empty(0, dtype=np.int64)
        if not len(mine):
            return math.nan, math.nan
        values = self.pct[mine[np.argsort(self.order[mine], kind="stable")]]
        mean = values.sum(dtype=np.float64) / len(values)
        variance = ((mean - values) ** 2).sum(dtype=np.float64) / len(values)
        return float(mean), float(np.sqrt(variance))


def run_think_closers(run: RunDir) -> dict[str, str]:
    """Each model's closing think tag (``</think>``, EXAONE's ``</thought>``), by model name, from the
    conventions of the models in the run's manifest; empty when the run has none."""
    return think_closers(open_run(run).config.models) if is_run_dir(run.path) else {}


def run_length_measure(run: RunDir) -> LengthMeasure:
    """How the run measures length overhead (its plan's ``length``, `recovery.plan`); the project's measure for a
    directory without a manifest."""
    return open_run(run).plan.length if is_run_dir(run.path) else LengthMeasure()


class RunLengths:
    """What a length measure (`recovery.plan.LengthMeasure.whole_pct`) may read of a run: its chains as
    `chain_tallies` holds them (``chains``: arrays by column, in stored chain order) and, computed on first use,
    the authors' whole-response lengths of every chain (``whole_response``)."""

    def __init__(self, run: RunDir, chains: dict[str, Any]):
        self.run, self.chains = run, chains

    @cached_property
    def whole_response(self) -> ReferenceLengths:
        return reference_chain_lengths(self.run)


def chain_tallies(
    run: RunDir, think_close: Mapping[str, str] | None = None, *, length: LengthMeasure | None = None
) -> ChainTallies:
    """Grades and continuation lengths of every chain folded into `ChainTallies` (chains without grades, or
    whose gold is unusable, are left out).

    ``length`` (default: `run_length_measure`): the project's measure takes ``whole_pct`` on reasoning, less the
    inserted characters (`recovery.metrics.length_change_pct`); a style's own measure replaces it
    (`recovery.plan.LengthMeasure.whole_pct`, e.g. the authors' complete answer against the whole original
    response, `recovery.metrics.reference`), and one that averages per completion keeps each completion's
    length. ``remaining_pct`` is the project's measure either way.

    A continuation's reasoning ends at its model's closing think tag: ``think_close`` maps model names to
    tags (default: `run_think_closers`); a model it does not name has the tag its name's conventions give
    (`recovery.models.spec_for`).

    Column-wise: chain attributes are read once into arrays, then grades and continuations are streamed
    batch by batch and folded into per-chain counts with `numpy.bincount`.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    domains = {r["id"]: r["domain"] for r in run.table(PROBLEMS_TABLE).iter_rows(["id", "domain"])}
    chains = _chain_arrays(run, domains)
    n_chains = len(chains["id"])
    lookup = ChainIndex(chains["id"])
    graded = np.zeros(n_chains, dtype=np.int32)
    correct = np.zeros(n_chains, dtype=np.int32)
    unusable = np.zeros(n_chains, dtype=np.int32)
    # Batches are read ahead in a thread: Parquet decoding runs without the GIL, beside the folding.
    for batch in prefetched(run.table(GRADES_TABLE).iter_batches(["chain_id", "verdict"])):
        index, found = lookup.find(batch.column(0))
        verdict = batch.column(1).filter(found)
        _accumulate(graded, index)
        _accumulate(correct, index, _is(verdict, Verdict.CORRECT))
        _accumulate(unusable, index, _is(verdict, Verdict.UNPARSABLE_GOLD))
    n_lengths = np.zeros(n_chains, dtype=np.int32)
    whole_sum = np.zeros(n_chains)
    n_remaining = np.zeros(n_chains, dtype=np.int32)
    remaining_sum = np.zeros(n_chains)
    models = chains["values"]["model"]
    model_code = {name: code for code, name in enumerate(models)}
    continued_by: dict[int, str] = {}  # chain → the other model that continued it (Table 9 swap runs)
    closers = _Closers(run_think_closers(run) if think_close is None else think_close)
    measure = run_length_measure(run) if length is None else length
    lengths = RunLengths(run, chains)
    columns = ["chain_id", "text", "model", *(["sample_index"] if measure.per_completion else [])]
    problem_position = {pid: i for i, pid in enumerate(domains)}
    completions: list[tuple[Any, Any, Any]] = []
    for batch in prefetched(run.table(CONTINUATIONS_TABLE).iter_batches(columns)):
        index, found = lookup.find(batch.column(0))
        text = pc.fill_null(batch.column(1).filter(found), "")
        continuing = pc.dictionary_encode(pc.fill_null(batch.column(2).filter(found), ""))
        names = continuing.dictionary.to_pylist()
        which = continuing.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        continuing_code = np.array([model_code.get(name, -1) for name in names], dtype=np.int64)[which]
        for k in np.flatnonzero(continuing_code != chains["codes"]["model"][index]):
            continued_by.setdefault(int(index[k]), names[which[k]])
        new = _reasoning_chars(text, [closers(name) for name in names], which)
        whole, remaining = length_change_pct(
            chains["kept"][index],
            chains["original_prefix_chars"][index],
            chains["original_reasoning_chars"][index],
            new,
        )
        whole = measure.whole_pct(lengths, index, text, whole)
        measured = ~np.isnan(whole)
        if measure.per_completion:
            samples = pc.fill_null(batch.column(3).filter(found), 0).to_numpy(zero_copy_only=False)
            completions.append((index[measured], samples[measured], whole[measured]))
        _accumulate(n_lengths, index[measured])
        _accumulate(whole_sum, index[measured], whole[measured])
        measured = ~np.isnan(remaining)
        _accumulate(n_remaining, index[measured])
        _accumulate(remaining_sum, index[measured], remaining[measured])
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
        codes={name: codes[name][keep] for name in CODED},
        values=chains["values"],
        target_t=chains["target_t"][keep],
        n=graded[keep],
        k=correct[keep],
        whole_pct=whole_pct[keep],
        remaining_pct=remaining_pct[keep],
        completions=_kept_completions(completions, keep, chains, problem_position) if measure.per_completion else None,
    )


def _kept_completions(parts: list, keep: Any, chains: dict, problem_position: dict[str, int]) -> CompletionLengths:
    """`CompletionLengths` of the kept chains (``keep``, renumbered as the tallies' chains), each completion
    ordered by its problem's place in the problems table, then its chain, then its sample index."""
    import numpy as np

    def joined(i: int, dtype) -> Any:
        return np.concatenate([p[i] for p in parts]).astype(dtype) if parts else np.empty(0, dtype=dtype)

    chain, sample, pct = joined(0, np.int64), joined(1, np.int64), joined(2, np.float64)
    unplaced = len(problem_position)
    position = np.array([problem_position.get(p, unplaced) for p in chains["values"]["problem"]], dtype=np.int64)
    order = np.empty(len(chain), dtype=np.int64)
    order[np.lexsort((sample, chain, position[chains["codes"]["problem"][chain]]))] = np.arange(len(chain))
    renumbered = np.full(len(chains["id"]), -1, dtype=np.int64)
    renumbered[keep] = np.arange(len(keep))
    kept = renumbered[chain] >= 0
    return CompletionLengths(renumbered[chain][kept], order[kept], pct[kept])


def chain_outcomes(run: RunDir) -> list[ChainOutcome]:
    """One `ChainOutcome` per chain that has grades (chains whose gold is unusable are left out), in
    stored chain order. Holds a Python object per chain: for small runs (ablations); the aggregate stage
    works group by group instead."""
    tallies = chain_tallies(run)
    return [tallies.outcome(i) for i in range(len(tallies))]


class _Closers:
    """``closers(model_name)``: the closing think tag of a model, from the given mapping, else from the
    conventions its name gives (`recovery.run_config.ThinkTagsOf`, looked up once per name)."""

    def __init__(self, known: Mapping[str, str]) -> None:
        self.known, self.by_name = dict(known), ThinkTagsOf()

    def __call__(self, name: str) -> str:
        return self.known[name] if name in self.known else self.by_name(name)[1]


def _reasoning_chars(text, closer_of_name: list[str], which) -> Any:
    """Characters of each continuation's reasoning (`recovery.metrics.reasoning_lengths`), each cut at the
    closing tag of the model that wrote it (``closer_of_name[which[i]]``)."""
    import numpy as np
    import pyarrow as pa

    row_closer = np.array(closer_of_name, dtype=object)[which] if closer_of_name else np.empty(0, dtype=object)
    new = np.zeros(len(text), dtype=np.float64)
    for closer in sorted(set(closer_of_name)):
        mask = row_closer == closer
        if not mask.any():
            continue
        new[mask] = reasoning_lengths(text if mask.all() else text.filter(pa.array(mask)), closer)
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
    values: dict[str, list[str]] = {name: [] for name in CODED}
    index_of: dict[str, dict[str, int]] = {name: {} for name in CODED}
    ids: list = []
    codes: dict[str, list] = {name: [] for name in CODED}
    parts: dict[str, list] = {name: [] for name in (*numbers, "kept")}
    table = run.table(CHAINS_TABLE)
    # Chains written before ``kept_chars`` was stored have it recomputed from their texts.
    stored_kept = table.has_column("kept_chars")
    texts = ["kept_chars"] if stored_kept else ["prefix", "inserted_text"]
    columns = ["id", "problem_id", "model", "intervention", "category", *numbers, *texts]
    for batch in table.iter_batches(columns, batch_size=8192):
        ids.append(batch.column("id"))
        for name in CODED:
            source = batch.column("problem_id" if name in ("domain", "problem") else name)
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
    for name in CODED:
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
