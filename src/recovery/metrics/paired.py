"""Intervals for a before/after change measured twice on the same units (chains or problems).

Pairing removes the between-unit spread (easy and hard problems) from the change, so a paired interval is
much narrower than two independent intervals would suggest. 0/1 outcomes (majority robustness, clean
accuracy) use Newcombe's interval, which keeps a width when every pair agrees; continuous values (length
overhead) a percentile bootstrap of the mean difference with a fixed seed. Pairs that share a problem (the
chains of one problem pooled over cells) get the clustered form of each, with the problem as the unit
(`recovery.metrics.clustered`): Newcombe's interval at the effective number of pairs, a bootstrap that
resamples problems with all their pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recovery.metrics.clustered import Clustering, bootstrap_mean_interval, clustering, design_effect
from recovery.metrics.intervals import wilson_interval


@dataclass(frozen=True, slots=True)
class PairedChange:
    """Means over the pairs before and after, their difference (after − before) and its interval, in the
    unit of the values (fractions for 0/1 outcomes). NaN throughout when there are no pairs. ``problems``:
    the distinct problems behind the pairs; ``interval``: how the interval treats them (`interval_name`)."""

    before: float
    after: float
    delta: float
    ci_low: float
    ci_high: float
    pairs: int
    problems: int = 0
    interval: str = ""


def newcombe_paired_interval(
    both: float, before_only: float, after_only: float, neither: float, *, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval of p_after − p_before for paired 0/1 outcomes from the four pair counts (fractional counts:
    effective ones, divided by a design effect).

    Newcombe's method 10 (R. G. Newcombe, "Improved confidence intervals for the difference between
    binomial proportions based on paired data", Statistics in Medicine 17:2635–2650, 1998): the Wilson
    intervals of the two proportions combined by square-and-add, corrected for their correlation φ
    (with Newcombe's shrinkage of a positive φ by n/2). When every pair agrees the interval still has a
    width, which the Wald interval of the mean difference does not.

    Cavo et al. (2012), a worked example in Fagerland, Lydersen and Laake, "Statistical Analysis of
    Contingency Tables" (2017), chapter 8:

    >>> [round(x, 4) for x in newcombe_paired_interval(59, 16, 6, 80)]
    [-0.1186, -0.0046]
    """
    counts = (both, before_only, after_only, neither)
    if any(c < 0 for c in counts):
        raise ValueError(f"pair counts must be ≥ 0, got {counts}")
    n = sum(counts)
    if n == 0:
        return math.nan, math.nan
    after_ok, before_ok = both + after_only, both + before_only
    p1, p2 = after_ok / n, before_ok / n
    l1, u1 = wilson_interval(after_ok, n, confidence=confidence)
    l2, u2 = wilson_interval(before_ok, n, confidence=confidence)
    margins = after_ok * (n - after_ok) * before_ok * (n - before_ok)
    phi = 0.0
    if margins > 0:
        cross = both * neither - after_only * before_only
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    theta = p1 - p2
    low = theta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = theta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, low), min(1.0, high)


def paired_proportions(
    before: Sequence[bool] | np.ndarray,
    after: Sequence[bool] | np.ndarray,
    *,
    confidence: float = 0.95,
    clusters: Sequence[object] | np.ndarray | None = None,
) -> PairedChange:
    """The change of a 0/1 outcome over pairs (``before[i]``, ``after[i]``) with `newcombe_paired_interval`;
    ``clusters`` names each pair's problem (None: one problem per pair). Pairs that share problems get
    Newcombe's interval at the effective number of pairs: the counts divided by the design effect of the
    paired difference.

    >>> c = paired_proportions([1, 1, 0, 0], [1, 1, 1, 0])
    >>> (c.before, c.after, c.delta, c.pairs, c.interval)
    (0.5, 0.75, 0.25, 4, 'Newcombe')
    """
    b, a = _pair_arrays(before, after)
    n = int(b.size)
    groups = clustering(clusters, n)
    if n == 0:
        return PairedChange(math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    b, a = b.astype(bool), a.astype(bool)
    counts = [int(np.sum(b & a)), int(np.sum(b & ~a)), int(np.sum(~b & a)), int(np.sum(~b & ~a))]
    deff = design_effect(a.astype(float) - b.astype(float), groups)
    low, high = newcombe_paired_interval(*(count / deff for count in counts), confidence=confidence)
    mean_b, mean_a = float(b.mean()), float(a.mean())
    return PairedChange(
        mean_b, mean_a, mean_a - mean_b, low, high, n, groups.problems, interval_name("Newcombe", groups)
    )


def paired_mean_difference(
    before: Sequence[float] | np.ndarray,
    after: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    clusters: Sequence[object] | np.ndarray | None = None,
) -> PairedChange:
    """The mean change of a continuous value over pairs, with a percentile bootstrap that resamples pairs, or
    the problems named by ``clusters`` with all their pairs (``n_boot`` resamples from ``seed``, so the
    interval is reproducible).

    >>> c = paired_mean_difference([10.0, 20.0, 30.0], [12.0, 22.0, 32.0])
    >>> (c.delta, c.ci_low, c.ci_high)
    (2.0, 2.0, 2.0)
    """
    b, a = _pair_arrays(before, after)
    n = int(b.size)
    groups = clustering(clusters, n)
    if n == 0:
        return PairedChange(math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    diff = a.astype(float) - b.astype(float)
    low, high = bootstrap_mean_interval(diff, groups, confidence=confidence, n_boot=n_boot, seed=seed)
    # Float rounding in the resample means must not leave the point estimate outside its own interval.
    delta = float(diff.mean())
    return PairedChange(
        float(b.mean()),
        float(a.mean()),
        delta,
        min(low, delta),
        max(high, delta),
        n,
        groups.problems,
        interval_name("bootstrap", groups),
    )


def interval_name(method: str, groups: Clustering) -> str:
    """How a paired interval treats its units, for reports: ``Newcombe`` (one pair per problem) or
    ``Newcombe, clustered by problem`` (pairs sharing problems; ``bootstrap over problems`` for the bootstrap).
    """
    if groups.one_per_problem:
        return method
    return "bootstrap over problems" if method == "bootstrap" else f"{method}, clustered by problem"


def _pair_arrays(before, after) -> tuple[np.ndarray, np.ndarray]:
    b, a = np.asarray(before), np.asarray(after)
    if b.shape != a.shape or b.ndim != 1:
        raise ValueError(f"paired samples need two 1-D arrays of one length, got shapes {b.shape} and {a.shape}")
    return b, a
