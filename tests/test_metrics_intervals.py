"""Confidence intervals of `recovery.metrics.summarize`: Wilson for 0/1 samples, bootstrap otherwise."""

from __future__ import annotations

import pytest

from recovery.analysis import bbm
from recovery.metrics import AggregateRow, ChainOutcome, aggregate, summarize, wilson_interval, z_score

Z = 1.959963984540054


def test_all_ones_and_all_zeros_keep_a_width():
    # k = n: the lower bound is n / (n + z²); k = 0: the upper bound is z² / (n + z²).
    ones, zeros = summarize([1] * 10), summarize([0] * 10)
    assert (ones.mean, ones.ci_low, ones.ci_high) == pytest.approx((1.0, 10 / (10 + Z * Z), 1.0))
    assert (zeros.mean, zeros.ci_low, zeros.ci_high) == pytest.approx((0.0, 0.0, Z * Z / (10 + Z * Z)))
    for s in (ones, zeros):
        assert s.ci_high - s.ci_low > 0.2
        assert s.ci_low <= s.mean <= s.ci_high


def test_binary_interval_is_wilson_and_follows_confidence():
    # 3 of 5 at 95 %: centre (0.6 + z²/10)/(1 + z²/5), half z·sqrt(0.24/5 + z²/100)/(1 + z²/5).
    s = summarize([1, 0, 1, 1, 0])
    assert (s.ci_low, s.ci_high) == pytest.approx((0.2307, 0.8824), abs=1e-4)
    wide = summarize([1, 0, 1, 1, 0], confidence=0.99)
    assert wide.ci_low < s.ci_low and wide.ci_high > s.ci_high
    assert (wide.ci_low, wide.ci_high) == pytest.approx(wilson_interval(3, 5, confidence=0.99))
    assert z_score(0.99) == pytest.approx(2.5758, abs=1e-4)


def test_continuous_samples_still_bootstrap():
    # Two distinct values: a percentile bootstrap interval lies on the grid of resample means (k/4).
    s = summarize([10.0, 20.0, 10.0, 20.0], n_boot=500)
    assert 10.0 <= s.ci_low < 15.0 < s.ci_high <= 20.0
    assert (s.ci_low * 4) % 10 == pytest.approx(0) and (s.ci_high * 4) % 10 == pytest.approx(0)


def test_robustness_levels_of_a_perfect_group_are_not_degenerate():
    outcomes = [ChainOutcome(f"c{i}", "m", "math", "paraphrase", "benign", 0.5, 8, 8) for i in range(6)]
    (row,) = aggregate(outcomes, n_boot=100)
    assert isinstance(row, AggregateRow)
    for level in (row.at_least_once, row.majority, row.all):
        assert level.mean == 1.0 and level.ci_low == pytest.approx(6 / (6 + Z * Z)) and level.ci_high == 1.0


def test_bbm_reexports_the_one_wilson_interval():
    assert bbm.wilson_interval is wilson_interval
    assert bbm.Z95 == pytest.approx(Z)
