"""Intervals with the problem as the unit of sampling: chains of one problem pooled over cells are not
independent, and an interval that counts them as independent is too narrow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recovery.metrics import summarize, wilson_interval
from recovery.metrics.clustered import clustering, design_effect
from recovery.metrics.paired import newcombe_paired_interval, paired_mean_difference, paired_proportions
from recovery.report import compute_comparison
from recovery.report.compare import RunOutcomes

INTERVENTIONS = (
    "complete_step",
    "paraphrase",
    "random_characters",
    "wikipedia_text",
    "wrong_continuation",
    "hallucinated_fact",
    "unrelated_cot",
)
TIMESTEPS = (0.1, 0.3, 0.5, 0.7, 0.9)
PER_PROBLEM = len(INTERVENTIONS) * len(TIMESTEPS)  # 35 chains of one problem, as in the paper's protocol


def _run(model, outcome_by_problem, whole_by_problem=None):
    """Every chain of a problem has that problem's outcome (and length change)."""
    return RunOutcomes.from_records(
        {
            "model": model,
            "domain": "math",
            "intervention": iv,
            "target_t": t,
            "problem_id": p,
            "n": 8,
            "k": 8 if ok else 0,
            "whole_pct": None if whole_by_problem is None else whole_by_problem[p],
        }
        for p, ok in outcome_by_problem.items()
        for iv in INTERVENTIONS
        for t in TIMESTEPS
    )


def test_a_problems_identical_chains_count_once_in_a_proportion():
    problems = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1]  # 13 problems, as in the demo's paired comparison
    chains = np.repeat(problems, PER_PROBLEM)
    ids = np.repeat([f"p{i}" for i in range(len(problems))], PER_PROBLEM)
    pooled = summarize(chains, clusters=ids)
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(wilson_interval(sum(problems), len(problems)))
    naive = summarize(chains)  # chains as if independent: today's interval
    ratio = (pooled.ci_high - pooled.ci_low) / (naive.ci_high - naive.ci_low)
    assert ratio == pytest.approx(math.sqrt(PER_PROBLEM), rel=0.35)  # narrower by about √35 ≈ 5.9
    assert design_effect(chains.astype(float), clustering(ids, chains.size)) == pytest.approx(PER_PROBLEM)


def test_the_pooled_paired_interval_of_a_comparison_is_the_interval_over_problems():
    before = {f"p{i}": ok for i, ok in enumerate([0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1])}
    after = {f"p{i}": ok for i, ok in enumerate([1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1])}
    comp = compute_comparison(_run("base", before), _run("sft", after))
    pooled = comp.overall[0]
    counts = [
        sum(before[p] and after[p] for p in before),
        sum(before[p] and not after[p] for p in before),
        sum(after[p] and not before[p] for p in before),
        sum(not before[p] and not after[p] for p in before),
    ]
    over_problems = [100 * x for x in newcombe_paired_interval(*counts)]
    assert (pooled["majority_ci_low"], pooled["majority_ci_high"]) == pytest.approx(over_problems)
    assert (pooled["majority_pairs"], pooled["majority_problems"]) == (13 * PER_PROBLEM, 13)
    assert pooled["majority_interval"] == "Newcombe, clustered by problem"
    for row in (*comp.by_intervention, *comp.by_category, *comp.by_timestep):  # every pooled row alike
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(over_problems)
        assert row["problems"] == 13
    cell = comp.by_cell[0]  # one chain per problem: Newcombe over its chains, as before
    assert (cell["interval"], cell["pairs"], cell["problems"]) == ("Newcombe", 13, 13)
    assert (cell["ci_low"], cell["ci_high"]) == pytest.approx(over_problems)
    naive = paired_proportions(np.repeat(list(before.values()), 35), np.repeat(list(after.values()), 35))
    assert naive.ci_high - naive.ci_low < (over_problems[1] - over_problems[0]) / 100 / 3  # today's, far narrower
    assert "455 paired chains of 13 problems, Newcombe, clustered by problem" in comp.summary


def test_the_length_bootstrap_resamples_problems():
    rng = np.random.default_rng(7)
    whole_b = {f"p{i}": float(x) for i, x in enumerate(rng.normal(10, 20, size=13))}
    whole_a = {p: w + float(rng.normal(15, 25)) for p, w in whole_b.items()}
    ok = dict.fromkeys(whole_b, 1)
    comp = compute_comparison(_run("base", ok, whole_b), _run("sft", ok, whole_a))
    pooled = comp.overall[0]
    over_problems = paired_mean_difference(list(whole_b.values()), list(whole_a.values()))
    assert (pooled["length_ci_low"], pooled["length_ci_high"]) == pytest.approx(
        (over_problems.ci_low, over_problems.ci_high)
    )
    assert pooled["length_interval"] == "bootstrap over problems"


def test_chains_of_one_problem_that_disagree_shrink_the_design_effect():
    # Within each problem the chains split half and half and every problem has the same rate: the problems
    # carry no spread of their own, so the clustered interval is the chain-level one (design effect 1).
    chains = np.tile([1, 0], 20 * 10)
    ids = np.repeat([f"p{i}" for i in range(20)], 20)
    assert design_effect(chains.astype(float), clustering(ids, chains.size)) == pytest.approx(1.0)
    assert summarize(chains, clusters=ids) == summarize(chains)


def test_clusters_must_name_every_unit():
    with pytest.raises(ValueError, match="one label per unit"):
        summarize([1, 0, 1], clusters=["a", "b"])
