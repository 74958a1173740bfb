"""Confidence intervals of a sample's mean: Wilson's score interval for 0/1 outcomes (robustness levels), a
percentile bootstrap for continuous values (length change); mean ± population std beside them, as the paper's
Tables 18–20 report. Samples whose units share problems get the clustered form of each
(`recovery.metrics.clustered`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recovery.metrics.clustered import bootstrap_mean_interval, clustering, design_effect


def z_score(confidence: float) -> float:
    """The two-sided standard-normal quantile of ``confidence`` (1.96 for 0.95).

    >>> round(z_score(0.95), 4), round(z_score(0.99), 4)
    (1.96, 2.5758)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(k: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (NaN, NaN when ``n`` is 0). Counts may be
    fractional: effective counts, divided by a design effect (`recovery.metrics.clustered`).

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
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    clusters: Sequence[object] | np.ndarray | None = None,
) -> Summary:
    """Mean, population std and a confidence interval of ``values``; ``clusters`` names each value's problem
    (None: one problem per value).

    Binary samples (every value 0 or 1: the robustness levels) get the `wilson_interval` of their
    count of ones, at the effective sample size when values share problems; a percentile bootstrap there
    collapses to a zero-width interval when every outcome is equal. Other samples (length changes) get a
    percentile bootstrap of the mean with ``n_boot`` resamples seeded by ``seed``, resampling problems.

    >>> s = summarize([1, 1, 1, 0])
    >>> (s.mean, round(s.std, 3), s.n, round(s.ci_low, 4), round(s.ci_high, 4))
    (0.75, 0.433, 4, 0.3006, 0.9544)
    >>> s = summarize([1, 1, 1, 1, 0, 0], clusters=["a", "a", "b", "b", "c", "c"])
    >>> [round(x, 4) for x in (s.ci_low, s.ci_high)] == [round(x, 4) for x in wilson_interval(2, 3)]
    True
    """
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, math.nan, 0)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    groups = clustering(clusters, n)
    mean = float(arr.mean())
    std = float(arr.std())
    if np.all((arr == 0) | (arr == 1)):
        k = int(arr.sum())
        if groups.one_per_problem:
            low, high = wilson_interval(k, n, confidence=confidence)
        else:
            deff = design_effect(arr, groups)
            low, high = wilson_interval(k / deff, n / deff, confidence=confidence)
        return Summary(mean, std, low, high, n)
    low, high = bootstrap_mean_interval(arr, groups, confidence=confidence, n_boot=n_boot, seed=seed)
    return Summary(mean, std, low, high, n)
