"""Corpus level: chains grouped (by model, domain, intervention and timestep) into the mean, population std
and confidence interval of each robustness level and of the length change (paper §4.1, App. F).

`summarize_chains` is the one computation of a group's statistics, on arrays; `aggregate` groups
`ChainOutcome` objects and applies it, and the run's aggregate stage applies it to per-chain arrays.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from recovery.metrics.chain import ChainOutcome, robustness_levels
from recovery.metrics.intervals import Summary, summarize

LEVELS: tuple[str, ...] = ("at_least_once", "majority", "all")
DEFAULT_GROUP_BY: tuple[str, ...] = ("model", "domain", "intervention", "target_t")


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


def summarize_chains(
    k,
    n,
    whole_pct,
    remaining_pct,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    problems=None,
) -> tuple[Summary, Summary, Summary, Summary, Summary]:
    """The `Summary` of each robustness level (`LEVELS`) and of both length changes over one group of chains,
    given per chain: ``k`` of ``n`` continuations correct and the mean length changes (NaN: not measured),
    and its problem (``problems``; None: one chain per problem), the unit of sampling of the intervals
    (`recovery.metrics.clustered`). Chains keep their order, so bootstrap intervals do not depend on how the
    group was gathered."""
    whole = np.asarray(whole_pct, dtype=float)
    remaining = np.asarray(remaining_pct, dtype=float)
    problems = None if problems is None else np.asarray(problems)
    has_whole, has_remaining = ~np.isnan(whole), ~np.isnan(remaining)
    samples = [(level, problems) for level in robustness_levels(k, n)]
    for values, has in ((whole, has_whole), (remaining, has_remaining)):
        samples.append((values[has], None if problems is None else problems[has]))
    at_least_once, majority, all_, whole_s, remaining_s = (
        summarize(np.asarray(v, dtype=float), confidence=confidence, n_boot=n_boot, seed=seed, clusters=c)
        for v, c in samples
    )
    return at_least_once, majority, all_, whole_s, remaining_s


def aggregate(
    outcomes: Iterable[ChainOutcome],
    *,
    by: Sequence[str] = DEFAULT_GROUP_BY,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[AggregateRow]:
    """Group chain outcomes by the ``by`` fields and summarise each level and length change
    (`summarize_chains`), with each chain's ``problem_id`` as its unit of sampling (a chain without one is a
    problem of its own).

    Rows are sorted by key so output is deterministic whatever the input order. Works on a stream:
    only four small numbers per chain are held.
    """
    allowed = set(ChainOutcome.__dataclass_fields__)
    unknown = [b for b in by if b not in allowed]
    if unknown:
        raise ValueError(f"cannot group by {unknown}; choose from {sorted(allowed)}")
    groups: dict[tuple, list[list]] = defaultdict(lambda: [[], [], [], [], []])
    for o in outcomes:
        g = groups[tuple(getattr(o, b) for b in by)]
        g[0].append(o.k)
        g[1].append(o.n)
        g[2].append(math.nan if o.whole_pct is None else o.whole_pct)
        g[3].append(math.nan if o.remaining_pct is None else o.remaining_pct)
        g[4].append(f"problem {o.problem_id}" if o.problem_id is not None else f"chain {o.chain_id}")
    rows = []
    for key in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
        k, n, whole, remaining, problems = groups[key]
        stats = summarize_chains(
            k, n, whole, remaining, confidence=confidence, n_boot=n_boot, seed=seed, problems=problems
        )
        rows.append(AggregateRow(dict(zip(by, key)), len(k), *stats))
    return rows
