"""Robustness and length-overhead metrics (paper §4.1, §4.3, App. F). Pure functions, no I/O.

Sample level → chain level → corpus level, kept apart as in lighteval/inspect: a chain's N graded
continuations give K correct; K gives the three robustness levels; chains are aggregated per
(model, domain, intervention, timestep) into mean ± std (population std, which reproduces the paper's
Tables 18–20: 0.932 → ±0.251) with a confidence interval: Wilson's score interval for 0/1 outcomes
(robustness levels), a percentile bootstrap for continuous values (length change).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from recovery.types import Grade, Intervened, Verdict

LEVELS: tuple[str, ...] = ("at_least_once", "majority", "all")
DEFAULT_GROUP_BY: tuple[str, ...] = ("model", "domain", "intervention", "target_t")


def majority_threshold(n: int) -> int:
    """Smallest K that is a majority of N samples: ⌊N/2⌋ + 1 (5 of 8, 2 of 3).

    >>> majority_threshold(8), majority_threshold(3), majority_threshold(1)
    (5, 2, 1)
    """
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    return n // 2 + 1


@dataclass(frozen=True, slots=True)
class RobustnessLevels:
    """The paper's three strictness levels for one chain with K of N continuations correct."""

    at_least_once: bool
    majority: bool
    all: bool


def robustness(k: int, n: int) -> RobustnessLevels:
    """K correct of N → at-least-once (K ≥ 1), majority (K ≥ ⌊N/2⌋+1), all (K = N).

    >>> robustness(4, 8)
    RobustnessLevels(at_least_once=True, majority=False, all=False)
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    return RobustnessLevels(k >= 1, k >= majority_threshold(n), k == n)


# ---------------------------------------------------------------------------------------------- lengths


class LengthFn(Protocol):
    def __call__(self, text: str) -> int: ...


def char_length(text: str) -> int:
    """Length in characters (the default unit)."""
    return len(text)


def token_length(tokenizer) -> LengthFn:
    """Length in tokens of ``tokenizer`` (anything with ``encode(text, add_special_tokens=False)``)."""

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False)) if text else 0

    return count


@dataclass(frozen=True, slots=True)
class LengthChange:
    """CoT-length change of one continuation, in percent.

    ``whole_pct``: the paper's Tables 5–6 measure — the whole intervened CoT (prefix + continuation) with
    the inserted text removed, against the original CoT of the same trace.
    ``remaining_pct``: the continuation alone against the original reasoning after the cut — the cost of
    finishing from the intervention point (it isolates the recovery from the unchanged prefix).
    """

    whole_pct: float
    remaining_pct: float | None


def continuation_reasoning(continuation: str, think_close: str = "</think>") -> str:
    """The reasoning part of a continuation: up to the closing think tag, or all of it if never closed."""
    end = continuation.find(think_close)
    return continuation if end < 0 else continuation[:end]


def length_change(
    intervened: Intervened,
    continuation: str,
    *,
    original_reasoning: str | None = None,
    length: LengthFn = char_length,
    think_close: str = "</think>",
) -> LengthChange:
    """Length overhead of one continuation of ``intervened``.

    In characters this needs only the lengths stored on `Intervened`. In another unit (``length`` =
    `token_length(tokenizer)`) pass ``original_reasoning`` so the original pieces can be re-measured.

    >>> from recovery.types import Intervened
    >>> iv = Intervened("tr", "p", "m", "wikipedia_text", "neutral", 0.5, 0.5, 1, 4, "aaaa\\n\\nXXXX", "XXXX",
    ...                 10, 20)
    >>> lc = length_change(iv, "b" * 14 + "</think>")      # 6 kept + 14 new = 20 → 0 %
    >>> (lc.whole_pct, lc.remaining_pct)                    # remaining: 14 vs 20 - 10 = 10 → +40 %
    (0.0, 40.0)
    """
    reasoning_cont = continuation_reasoning(continuation, think_close)
    if length is char_length:
        kept = len(intervened.prefix) - len(intervened.inserted_text)
        original_total = intervened.original_reasoning_chars
        original_prefix = intervened.original_prefix_chars
    else:
        if original_reasoning is None:
            raise ValueError("length in a unit other than characters needs original_reasoning")
        kept = max(length(intervened.prefix) - length(intervened.inserted_text), 0)
        original_total = length(original_reasoning)
        original_prefix = length(original_reasoning[: intervened.original_prefix_chars])
    if original_total <= 0:
        raise ValueError(f"chain {intervened.id}: original reasoning is empty; length change is undefined")
    return length_change_from_counts(kept, original_prefix, original_total, length(reasoning_cont))


def length_change_from_counts(kept: int, original_prefix: int, original_total: int, new: int) -> LengthChange:
    """`length_change` from lengths alone (any unit): ``kept`` = intervened prefix minus inserted text,
    ``new`` = continuation reasoning. Used directly when streaming millions of rows.

    >>> length_change_from_counts(6, 10, 20, 24)
    LengthChange(whole_pct=50.0, remaining_pct=140.0)
    """
    if original_total <= 0:
        raise ValueError("original reasoning is empty; length change is undefined")
    whole = 100.0 * ((kept + new) - original_total) / original_total
    original_remaining = original_total - original_prefix
    remaining = 100.0 * (new - original_remaining) / original_remaining if original_remaining > 0 else None
    return LengthChange(whole_pct=whole, remaining_pct=remaining)


# ------------------------------------------------------------------------------------------- chain level


@dataclass(frozen=True, slots=True)
class ChainOutcome:
    """One intervened chain after grading its N continuations: the unit the paper aggregates."""

    chain_id: str
    model: str
    domain: str
    intervention: str
    category: str
    target_t: float
    n: int
    k: int
    whole_pct: float | None = None
    remaining_pct: float | None = None

    @property
    def levels(self) -> RobustnessLevels:
        return robustness(self.k, self.n)


class UngradableChain(ValueError):
    """Every grade of a chain says the gold answer is unusable; the chain cannot be scored."""


def chain_outcome(
    intervened: Intervened,
    domain: str,
    grades: Sequence[Grade],
    continuations: Sequence[str] | None = None,
    *,
    length: LengthFn = char_length,
    original_reasoning: str | None = None,
) -> ChainOutcome:
    """Fold N grades (and optionally the N continuation texts, for length) into a `ChainOutcome`.

    ``NO_ANSWER``, ``TIMEOUT`` and ``ERROR`` count as not correct (the model did not reach a verifiable
    answer); ``UNPARSABLE_GOLD`` on every sample raises `UngradableChain` so callers skip and count it.
    Length changes are the mean over the continuations.
    """
    if not grades:
        raise ValueError(f"chain {intervened.id}: no grades")
    if all(g.verdict is Verdict.UNPARSABLE_GOLD for g in grades):
        raise UngradableChain(f"chain {intervened.id}: gold answer of problem {intervened.problem_id} is unparsable")
    whole = remaining = None
    if continuations is not None:
        if len(continuations) != len(grades):
            raise ValueError(f"chain {intervened.id}: {len(continuations)} continuations but {len(grades)} grades")
        changes = [
            length_change(intervened, c, length=length, original_reasoning=original_reasoning) for c in continuations
        ]
        whole = float(np.mean([c.whole_pct for c in changes]))
        rem = [c.remaining_pct for c in changes if c.remaining_pct is not None]
        remaining = float(np.mean(rem)) if rem else None
    return ChainOutcome(
        chain_id=intervened.id,
        model=intervened.model,
        domain=domain,
        intervention=intervened.intervention,
        category=str(intervened.category),
        target_t=intervened.target_t,
        n=len(grades),
        k=sum(g.correct for g in grades),
        whole_pct=whole,
        remaining_pct=remaining,
    )


# ------------------------------------------------------------------------------------------ corpus level


def z_score(confidence: float) -> float:
    """The two-sided standard-normal quantile of ``confidence`` (1.96 for 0.95).

    >>> round(z_score(0.95), 4), round(z_score(0.99), 4)
    (1.96, 2.5758)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(k: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (NaN, NaN when ``n`` is 0).

    Unlike the normal approximation or a percentile bootstrap, it keeps a non-zero width when every
    outcome is the same (k = 0 or k = n), which is common: strong models score near 1, the toy near 0.

    >>> [round(x, 4) for x in wilson_interval(2, 4)]
    [0.15, 0.85]
    >>> [round(x, 4) for x in wilson_interval(10, 10)]
    [0.7225, 1.0]
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    if n == 0:
        return math.nan, math.nan
    z = z_score(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Analytically the lower bound is 0 at k = 0 and the upper bound 1 at k = n; set them so rounding
    # cannot leave the mean just outside its own interval.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean ± population std of a sample, with a confidence interval (see `summarize`)."""

    mean: float
    std: float
    ci_low: float
    ci_high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.std:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] (n={self.n})"


def summarize(
    values: Sequence[float] | np.ndarray, *, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> Summary:
    """Mean, population std and a confidence interval of ``values``.

    Binary samples (every value 0 or 1: the robustness levels) get the `wilson_interval` of their
    count of ones; a percentile bootstrap there collapses to a zero-width interval when every outcome
    is equal. Other samples (length changes) get a percentile bootstrap of the mean with ``n_boot``
    resamples seeded by ``seed``.

    >>> s = summarize([1, 1, 1, 0])
    >>> (s.mean, round(s.std, 3), s.n, round(s.ci_low, 4), round(s.ci_high, 4))
    (0.75, 0.433, 4, 0.3006, 0.9544)
    """
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, math.nan, 0)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    mean = float(arr.mean())
    std = float(arr.std())
    if np.all((arr == 0) | (arr == 1)):
        low, high = wilson_interval(int(arr.sum()), n, confidence=confidence)
        return Summary(mean, std, low, high, n)
    rng = np.random.default_rng(seed)
    # Chunks of ~200k draws stay in cache and bound memory for large groups; take + sum is ~1.5× faster
    # than fancy indexing + mean (measured on 10k-chain groups).
    chunks = []
    per_chunk = max(1, 200_000 // n)
    for start in range(0, n_boot, per_chunk):
        size = min(per_chunk, n_boot - start)
        chunks.append(np.take(arr, rng.integers(0, n, size=(size, n))).sum(axis=1) / n)
    boot = np.concatenate(chunks)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    return Summary(mean, std, float(low), float(high), n)


@dataclass(frozen=True, slots=True)
class AggregateRow:
    """One group of chains (e.g. one model × domain × intervention × timestep) and its statistics."""

    key: Mapping[str, object]
    n_chains: int
    at_least_once: Summary
    majority: Summary
    all: Summary
    whole_pct: Summary
    remaining_pct: Summary
    extra: Mapping[str, object] = field(default_factory=dict)

    def flat(self) -> dict[str, object]:
        """A flat dict (one column per statistic) for tables, Parquet and W&B."""
        row: dict[str, object] = dict(self.key)
        row["n_chains"] = self.n_chains
        for name in (*LEVELS, "whole_pct", "remaining_pct"):
            for stat, value in asdict(getattr(self, name)).items():
                if stat != "n":
                    row[f"{name}_{stat}"] = value
        return row


def aggregate(
    outcomes: Iterable[ChainOutcome],
    *,
    by: Sequence[str] = DEFAULT_GROUP_BY,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[AggregateRow]:
    """Group chain outcomes by the ``by`` fields and summarise each level and length change.

    Rows are sorted by key so output is deterministic whatever the input order. Works on a stream:
    only four small numbers per chain are held.
    """
    allowed = set(ChainOutcome.__dataclass_fields__)
    unknown = [b for b in by if b not in allowed]
    if unknown:
        raise ValueError(f"cannot group by {unknown}; choose from {sorted(allowed)}")
    groups: dict[tuple, list[list[float]]] = defaultdict(lambda: [[], [], [], [], []])
    for o in outcomes:
        levels = o.levels
        g = groups[tuple(getattr(o, b) for b in by)]
        g[0].append(float(levels.at_least_once))
        g[1].append(float(levels.majority))
        g[2].append(float(levels.all))
        if o.whole_pct is not None:
            g[3].append(o.whole_pct)
        if o.remaining_pct is not None:
            g[4].append(o.remaining_pct)
    rows = []
    for key in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
        alo, maj, all_, whole, rem = groups[key]
        stats = [summarize(v, confidence=confidence, n_boot=n_boot, seed=seed) for v in (alo, maj, all_, whole, rem)]
        rows.append(AggregateRow(dict(zip(by, key)), len(alo), *stats))
    return rows


def pivot(
    rows: Iterable[AggregateRow], *, index: str, columns: str, value: Callable[[AggregateRow], float]
) -> tuple[list, list, list[list[float]]]:
    """A 2-D table (like the paper's Tables 5–8) from aggregate rows: (index labels, column labels, cells).

    Missing cells are NaN. ``value`` picks the number, e.g. ``lambda r: r.whole_pct.mean``.
    """
    cells: dict[tuple, float] = {}
    idx: list = []
    cols: list = []
    for r in rows:
        i, c = r.key[index], r.key[columns]
        if i not in idx:
            idx.append(i)
        if c not in cols:
            cols.append(c)
        if (i, c) in cells:
            raise ValueError(f"two rows share {index}={i!r}, {columns}={c!r}: aggregate by these two fields first")
        cells[(i, c)] = value(r)
    idx.sort(key=str)
    cols.sort(key=str)
    return idx, cols, [[cells.get((i, c), math.nan) for c in cols] for i in idx]
