"""Paired intervals of a before/after change: Newcombe's for 0/1 outcomes, a paired bootstrap otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recovery.metrics.paired import newcombe_paired_interval, paired_mean_difference, paired_proportions

Z = 1.959963984540054


def test_newcombe_matches_a_published_example():
    # Cavo et al. (2012): 59 both, 16 only the first, 6 only the second, 80 neither; Fagerland, Lydersen and
    # Laake (2017), chapter 8, give the square-and-add interval -0.1186 to -0.0046 for p2 − p1.
    assert newcombe_paired_interval(59, 16, 6, 80) == pytest.approx((-0.1186, -0.0046), abs=1e-4)


def test_all_pairs_agreeing_keeps_a_width():
    # p = 1 on both sides, φ = 0: the interval is ±(1 − l) with l = n / (n + z²), the Wilson lower bound.
    for both, neither in ((10, 0), (0, 10)):
        low, high = newcombe_paired_interval(both, 0, 0, neither)
        assert (low, high) == pytest.approx((-(Z * Z) / (10 + Z * Z), Z * Z / (10 + Z * Z)))
    change = paired_proportions([1] * 5 + [0] * 5, [1] * 5 + [0] * 5)
    assert change.delta == 0.0 and change.ci_low < 0 < change.ci_high


def test_paired_is_narrower_than_ignoring_the_pairing():
    # 38 of 50 after, 32 of 50 before. Strongly associated pairs (40 agree) give a narrower interval than
    # the same two proportions from pairs with no association (28 agree).
    paired = newcombe_paired_interval(30, 2, 8, 10)
    unassociated = newcombe_paired_interval(24, 8, 14, 4)
    assert paired[1] - paired[0] < unassociated[1] - unassociated[0]
    for low, high in (paired, unassociated):
        assert low <= 6 / 50 <= high


def test_empty_and_invalid():
    assert all(math.isnan(x) for x in newcombe_paired_interval(0, 0, 0, 0))
    assert paired_proportions([], []).pairs == 0 and math.isnan(paired_mean_difference([], []).delta)
    with pytest.raises(ValueError):
        newcombe_paired_interval(-1, 0, 0, 0)
    with pytest.raises(ValueError, match="one length"):
        paired_proportions([1, 0], [1])


def test_paired_bootstrap_is_reproducible_and_contains_the_mean():
    rng = np.random.default_rng(1)
    before = rng.normal(0, 50, size=40)  # large spread between units ...
    after = before + 5 + rng.normal(0, 2, size=40)  # ... small, consistent change
    a, b = paired_mean_difference(before, after, seed=3), paired_mean_difference(before, after, seed=3)
    assert a == b
    assert a.ci_low <= a.delta <= a.ci_high and 3 < a.ci_low and a.ci_high < 7
