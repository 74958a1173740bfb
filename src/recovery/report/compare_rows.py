"""The rows of a comparison, from the matched chains and problems of `recovery.report.pairing`.

Every change comes with a 95 % interval paired over the shared chains (or problems): Newcombe's interval
for majority robustness and clean accuracy, a paired bootstrap for the length overhead. Robustness and
accuracy are fractions and their changes percentage points; the length overhead is in % and its change in
points. Pooled rows (a domain, an intervention over its timesteps, a category, a timestep) pool the matched
chains of their shared cells, several per problem, so their intervals take the problem as the unit
(`recovery.metrics.clustered`); each row says which interval it carries (``interval``) and over how many
problems (``problems``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.metrics import wilson_interval
from recovery.metrics.paired import paired_mean_difference, paired_proportions
from recovery.report.data import CATEGORIES, order_interventions
from recovery.report.pairing import Pairing

PARTS: tuple[str, ...] = ("overall", "by_intervention", "by_category", "by_timestep", "by_cell", "length")


@dataclass(frozen=True)
class IntervalConfig:
    """How intervals are computed: confidence level, and resamples and seed of the length bootstrap."""

    confidence: float = 0.95
    n_boot: int = 2000
    seed: int = 0


def chain_rows(pairing: Pairing, stats: IntervalConfig = IntervalConfig()) -> dict[str, list[dict[str, Any]]]:
    """Rows per domain: overall, per intervention (pooled over timesteps), per category, per timestep,
    per cell (intervention, timestep, N) and the length overhead per intervention."""
    c, u = pairing.chains, pairing.unpaired
    category = dict(zip(c["intervention"].tolist(), c["category"].tolist()))
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in PARTS}
    for d in sorted(set(c["domain"].tolist())):
        in_d, un_d = c["domain"] == d, u["domain"] == d
        ivs = order_interventions(set(c["intervention"][in_d].tolist()), lambda iv: category[iv])
        for iv in ivs:
            m, um = in_d & (c["intervention"] == iv), un_d & (u["intervention"] == iv)
            key = {"domain": d, "intervention": iv, "category": category[iv]}
            out["by_intervention"].append({**key, **majority_change(pairing, m, um, stats)})
            out["length"].append({**key, **length_change(pairing, m, stats)})
            for t in _timesteps(c["target_t"][m]):
                for n in sorted(set(c["n"][m & _at(c["target_t"], t)].tolist())):
                    cm = m & _at(c["target_t"], t) & (c["n"] == n)
                    cu = um & _at(u["target_t"], t) & (u["n"] == n)
                    out["by_cell"].append({**key, "target_t": t, "n": n, **majority_change(pairing, cm, cu, stats)})
        for cat in CATEGORIES:
            m, um = in_d & (c["category"] == cat), un_d & (u["category"] == cat)
            if m.any():
                out["by_category"].append({"domain": d, "category": cat, **majority_change(pairing, m, um, stats)})
        for t in _timesteps(c["target_t"][in_d]):
            m, um = in_d & _at(c["target_t"], t), un_d & _at(u["target_t"], t)
            out["by_timestep"].append({"domain": d, "target_t": t, **majority_change(pairing, m, um, stats)})
        overall = {f"majority_{k}": v for k, v in majority_change(pairing, in_d, un_d, stats).items()}
        overall.update({f"length_{k}": v for k, v in length_change(pairing, in_d, stats).items()})
        out["overall"].append({"domain": d, **overall})
    return out


def majority_change(
    pairing: Pairing, mask: np.ndarray, unpaired_mask: np.ndarray, stats: IntervalConfig
) -> dict[str, Any]:
    """Majority robustness before/after over the matched chains in ``mask``, the change and its Newcombe
    interval in points (clustered by problem where chains share one), the number of pairs, of problems and
    of unmatched chains (``before_only``, ``after_only``)."""
    c, side = pairing.chains, pairing.unpaired["side"]
    change = paired_proportions(
        c["majority_before"][mask],
        c["majority_after"][mask],
        confidence=stats.confidence,
        clusters=c["problem_id"][mask],
    )
    return {
        "before": change.before,
        "after": change.after,
        "delta": 100 * change.delta,
        "ci_low": 100 * change.ci_low,
        "ci_high": 100 * change.ci_high,
        "pairs": change.pairs,
        "problems": change.problems,
        "interval": change.interval,
        "before_only": int(np.sum(unpaired_mask & (side == 0))),
        "after_only": int(np.sum(unpaired_mask & (side == 1))),
    }


def length_change(pairing: Pairing, mask: np.ndarray, stats: IntervalConfig) -> dict[str, Any]:
    """Length overhead (whole CoT, %) before/after over the matched chains in ``mask`` that have it on both
    sides, the change in points with a paired bootstrap interval (resampling problems where chains share
    one), and the number of pairs and of problems."""
    c = pairing.chains
    both = mask & ~np.isnan(c["whole_before"]) & ~np.isnan(c["whole_after"])
    change = paired_mean_difference(
        c["whole_before"][both],
        c["whole_after"][both],
        confidence=stats.confidence,
        n_boot=stats.n_boot,
        seed=stats.seed,
        clusters=c["problem_id"][both],
    )
    return {
        "before": change.before,
        "after": change.after,
        "delta": change.delta,
        "ci_low": change.ci_low,
        "ci_high": change.ci_high,
        "pairs": change.pairs,
        "problems": change.problems,
        "interval": change.interval,
    }


def clean_rows(entries: list[dict[str, Any]], stats: IntervalConfig = IntervalConfig()) -> list[dict[str, Any]]:
    """Clean accuracy per domain from `recovery.report.pairing.pair_clean`: each side on all its problems
    with a Wilson interval, and the change over the problems both have (Newcombe interval, points).

    Without per-problem outcomes on both sides the change is the difference of the two accuracies and has
    no interval (NaN), since it cannot be paired.
    """
    rows = []
    for e in entries:
        row: dict[str, Any] = {"domain": e["domain"], "n_before": e["n_before"], "n_after": e["n_after"]}
        for side in ("before", "after"):
            n, k = e[f"n_{side}"], e[f"correct_{side}"]
            row[side] = k / n if n else math.nan
            row[f"{side}_ci_low"], row[f"{side}_ci_high"] = wilson_interval(k, n, confidence=stats.confidence)
        change = paired_proportions(
            e["paired_before"], e["paired_after"], confidence=stats.confidence, clusters=e.get("paired_problems")
        )
        if change.pairs:
            row.update(delta=100 * change.delta, ci_low=100 * change.ci_low, ci_high=100 * change.ci_high)
        else:
            delta = 100 * (row["after"] - row["before"])
            row.update(delta=delta, ci_low=math.nan, ci_high=math.nan)
        row["pairs"], row["problems"], row["interval"] = change.pairs, change.problems, change.interval
        rows.append(row)
    return rows


def _timesteps(values: np.ndarray) -> list[float]:
    return sorted({round(float(t), 9) for t in values.tolist()})


def _at(values: np.ndarray, t: float) -> np.ndarray:
    return np.isclose(values.astype(float), t, rtol=0.0, atol=1e-9)
