"""Intervals over chains that share a problem: the problem, not the chain, is the unit of sampling.

The seven interventions × five timesteps of one problem are 35 chains cut from one trace. They share the
problem's difficulty, so pooled over cells they are not independent draws, and an interval that counts them
as independent is too narrow, by about the square root of the chains per problem when a problem's chains
tend to agree. Every interval over chains or problems goes through the functions here, with each unit's
problem (``clusters``), and follows one rule:

- **each problem contributes one unit** (a single intervention × timestep cell, clean accuracy over
  problems): the unit-level interval. Wilson's for a proportion, Newcombe's for a paired change of
  proportions (`recovery.metrics.paired`), a percentile bootstrap of the mean for continuous values.
- **several units per problem, 0/1 outcomes**: the same Wilson or Newcombe interval at the *effective
  sample size*, the number of units divided by the design effect: the cluster-robust variance of the
  mean over problems against the variance had the units been independent (Kish, "Survey Sampling", 1965;
  the effective-sample-size Wilson interval of Korn & Graubard, Survey Methodology 24:193–201, 1998). The
  design effect is never taken below 1. When every chain of a problem has the same outcome it equals the
  chains per problem, so the interval is exactly the one over problems; when all outcomes are equal there
  is no variance to compare and each problem counts once.
- **several units per problem, continuous values** (length overhead): a percentile bootstrap that resamples
  problems with all their units (a paired value keeps its pair), seeded, so the interval is reproducible.

`Clustering` says which rule a figure got and over how many problems, for reports to print beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# How an interval was computed, as reports name it.
UNIT_LEVEL = "unit"
CLUSTERED = "problems"


@dataclass(frozen=True, slots=True)
class Clustering:
    """The problems behind ``n`` units: ``codes[i]`` is unit i's problem in ``0..problems-1``."""

    codes: np.ndarray
    problems: int

    @property
    def n(self) -> int:
        return int(self.codes.size)

    @property
    def one_per_problem(self) -> bool:
        """True when no problem has two units: the unit-level intervals apply."""
        return self.problems == self.n

    @property
    def method(self) -> str:
        """`UNIT_LEVEL` or `CLUSTERED`, the rule the units get."""
        return UNIT_LEVEL if self.one_per_problem else CLUSTERED

    def sums(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per problem: the sum of ``values`` over its units, and its number of units."""
        return (
            np.bincount(self.codes, weights=values, minlength=self.problems),
            np.bincount(self.codes, minlength=self.problems).astype(float),
        )


def clustering(clusters: Sequence[object] | np.ndarray | None, n: int) -> Clustering:
    """The `Clustering` of ``n`` units whose problems are ``clusters`` (any hashable labels, one per unit);
    None means one problem per unit."""
    if clusters is None:
        return Clustering(np.arange(n, dtype=np.int64), n)
    labels = clusters.tolist() if isinstance(clusters, np.ndarray) else list(clusters)
    if len(labels) != n:
        raise ValueError(f"clusters: one label per unit needed, got {len(labels)} for {n} units")
    index: dict[object, int] = {}
    codes = np.fromiter((index.setdefault(label, len(index)) for label in labels), np.int64, count=n)
    return Clustering(codes, len(index))


def design_effect(values: np.ndarray, groups: Clustering) -> float:
    """The variance of the mean of ``values`` with problems as the unit of sampling, over its variance had
    the units been independent; at least 1. With no spread at all (every value equal), the units per problem
    (each problem counts once)."""
    n = groups.n
    if n == 0 or groups.one_per_problem:
        return 1.0
    mean = float(values.mean())
    independent = float(np.mean((values - mean) ** 2)) / n
    if independent <= 0.0:
        return n / groups.problems
    totals, counts = groups.sums(values)
    clustered = float(np.sum((totals - mean * counts) ** 2)) / (n * n)
    return max(1.0, clustered / independent)


def bootstrap_mean_interval(
    values: np.ndarray, groups: Clustering, *, confidence: float, n_boot: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``, resampling problems (each with all its
    units): with one unit per problem, the ordinary bootstrap over units. NaN, NaN for no units."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if groups.n == 0:
        return math.nan, math.nan
    totals, counts = groups.sums(values) if not groups.one_per_problem else (values, None)
    rng = np.random.default_rng(seed)
    c = groups.problems
    # Chunks of ~200k draws stay in cache and bound memory for large runs.
    per_chunk = max(1, 200_000 // c)
    means = []
    for start in range(0, n_boot, per_chunk):
        draw = rng.integers(0, c, size=(min(per_chunk, n_boot - start), c))
        if counts is None:
            means.append(np.take(totals, draw).sum(axis=1) / c)
        else:
            means.append(np.take(totals, draw).sum(axis=1) / np.take(counts, draw).sum(axis=1))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(np.concatenate(means), [alpha, 1 - alpha])
    return float(low), float(high)


__all__ = [
    "CLUSTERED",
    "UNIT_LEVEL",
    "Clustering",
    "bootstrap_mean_interval",
    "clustering",
    "design_effect",
]
