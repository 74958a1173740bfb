"""Before/after comparison on hand-made chain outcomes: hand-computed paired changes, what is left out,
refusals, the written report."""

from __future__ import annotations

import math
import re

import pytest

from recovery.metrics import wilson_interval
from recovery.metrics.paired import newcombe_paired_interval
from recovery.report import compare_reports, compute_comparison, write_comparison
from recovery.report.compare import NothingToCompare, RunOutcomes

Z = 1.959963984540054
PROBLEMS = ("p1", "p2", "p3", "p4")


def _chains(model, intervention, t, majority, whole=None, *, n=8, problems=PROBLEMS):
    """One chain per problem; a majority outcome of 1 is k = n (all correct), 0 is k = 0."""
    whole = whole or [None] * len(majority)
    return [
        {
            "model": model,
            "domain": "math",
            "intervention": intervention,
            "target_t": t,
            "problem_id": p,
            "n": n,
            "k": n if ok else 0,
            "whole_pct": w,
        }
        for p, ok, w in zip(problems, majority, whole)
    ]


@pytest.fixture
def before() -> RunOutcomes:
    chains = [
        *_chains("base", "wrong_continuation", 0.1, [1, 0, 0, 0], [10.0, 20.0, 30.0, 40.0]),
        *_chains("base", "wrong_continuation", 0.5, [1, 1, 0, 0]),
        *_chains("base", "wikipedia_text", 0.1, [1, 1, 1, 1]),
        *_chains("base", "wikipedia_text", 0.5, [1, 1, 1, 1]),  # N=8 here, N=4 after: not shared
        *_chains("base", "paraphrase", 0.1, [1, 0], problems=("p1", "p2")),  # only in the before run
    ]
    clean = [
        {"model": "base", "domain": "math", "problem_id": p, "correct": ok} for p, ok in zip(PROBLEMS, [1, 1, 1, 0])
    ]
    return RunOutcomes.from_records(chains, clean, meta={"models": "base", "seed": 0})


@pytest.fixture
def after() -> RunOutcomes:
    # The fine-tuned model has another name (one model on each side: paired), no paraphrase run, N=4 for
    # wikipedia_text at 0.5, and one extra problem (p5) that has no partner before.
    chains = [
        *_chains("sft", "wrong_continuation", 0.1, [1, 1, 1, 0], [20.0, 40.0, 40.0, 40.0]),
        *_chains("sft", "wrong_continuation", 0.1, [1], problems=("p5",)),
        *_chains("sft", "wrong_continuation", 0.5, [1, 1, 1, 1]),
        *_chains("sft", "wikipedia_text", 0.1, [1, 1, 1, 1]),
        *_chains("sft", "wikipedia_text", 0.5, [0, 0, 0, 0], n=4),
    ]
    clean = [{"model": "sft", "domain": "math", "problem_id": p, "correct": True} for p in PROBLEMS]
    return RunOutcomes.from_records(chains, clean, meta={"models": "sft", "seed": 0})


def _by(rows, **key):
    (row,) = [r for r in rows if all(r[k] == v for k, v in key.items())]
    return row


def test_changes_are_paired_over_shared_chains(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    assert comp.models == (("base", "sft"),)
    wrong = _by(comp.by_intervention, intervention="wrong_continuation")
    # 3 of 8 chains before, 7 of 8 after (p5 has no partner and is left out) → +50 points
    assert (wrong["before"], wrong["after"], wrong["delta"]) == pytest.approx((3 / 8, 7 / 8, 50.0))
    assert (wrong["pairs"], wrong["before_only"], wrong["after_only"], wrong["category"]) == (8, 0, 1, "adversarial")
    # wikipedia_text: only t=0.1 is shared (N differs at 0.5); every pair agrees on 1 → Δ 0 with an interval
    # of ±(1 − n/(n + z²)), not [0, 0].
    wiki = _by(comp.by_intervention, intervention="wikipedia_text")
    half = 100 * (1 - 4 / (4 + Z * Z))
    assert (wiki["delta"], wiki["pairs"]) == (0.0, 4)
    assert (wiki["ci_low"], wiki["ci_high"]) == pytest.approx((-half, half))
    assert not [r for r in comp.by_intervention if r["intervention"] == "paraphrase"]
    # t=0.1: (1 + 4)/8 → (3 + 4)/8; t=0.5: only wrong_continuation, 2/4 → 4/4
    assert _by(comp.by_timestep, target_t=0.1)["delta"] == pytest.approx(25.0)
    assert _by(comp.by_timestep, target_t=0.5)["delta"] == pytest.approx(50.0)
    assert [c["category"] for c in comp.by_category] == ["neutral", "adversarial"]
    overall = _by(comp.overall, domain="math")
    assert (overall["majority_before"], overall["majority_after"]) == pytest.approx((7 / 12, 11 / 12))
    # pairs: 7 both correct, 4 only after, 1 neither
    low, high = newcombe_paired_interval(7, 0, 4, 1)
    assert (overall["majority_ci_low"], overall["majority_ci_high"]) == pytest.approx((100 * low, 100 * high))
    # 4 discordant pairs, all for sft, are not enough to exclude no change (as McNemar's exact p = 0.125)
    assert overall["majority_ci_low"] < 0 < overall["majority_delta"]


def test_every_change_has_an_interval_around_it(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    rows = [*comp.by_intervention, *comp.by_category, *comp.by_timestep, *comp.by_cell, *comp.length, *comp.clean]
    rows += [{k[len("majority_") :]: v for k, v in o.items() if k.startswith("majority_")} for o in comp.overall]
    for r in rows:
        if r["pairs"]:
            assert r["ci_low"] <= r["delta"] <= r["ci_high"], r


def test_length_change_is_a_paired_bootstrap(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    wrong = _by(comp.length, intervention="wrong_continuation")
    # only the t=0.1 chains have lengths: 25 % → 35 %, differences 10, 20, 10, 0
    assert (wrong["before"], wrong["after"], wrong["delta"], wrong["pairs"]) == pytest.approx((25.0, 35.0, 10.0, 4))
    assert 0.0 <= wrong["ci_low"] < 10.0 < wrong["ci_high"] <= 20.0
    assert compute_comparison(before, after).length == comp.length  # fixed seed: the same interval every time
    assert _by(comp.length, intervention="wikipedia_text")["pairs"] == 0


def test_clean_accuracy_wilson_per_side_and_paired_change(before, after):
    clean = _by(compute_comparison(before, after).clean, domain="math")
    assert (clean["before"], clean["after"], clean["n_before"], clean["n_after"]) == (0.75, 1.0, 4, 4)
    assert (clean["before_ci_low"], clean["before_ci_high"]) == pytest.approx(wilson_interval(3, 4))
    assert (clean["after_ci_low"], clean["after_ci_high"]) == pytest.approx((4 / (4 + Z * Z), 1.0))
    assert (clean["delta"], clean["pairs"]) == (pytest.approx(25.0), 4)
    assert (clean["ci_low"], clean["ci_high"]) == pytest.approx([100 * x for x in newcombe_paired_interval(3, 0, 1, 0)])


def test_left_out_cells_are_named(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    left = {(c["side"], c["intervention"], c["target_t"], c["n"], c["chains"]) for c in comp.cells_left_out}
    assert left == {
        ("base", "paraphrase", 0.1, 8, 2),
        ("base", "wikipedia_text", 0.5, 8, 4),
        ("sft", "wikipedia_text", 0.5, 4, 4),
    }
    assert "- Left out, only in base: math: " not in comp.summary  # one domain: not repeated per cell
    left_base = "- Left out, only in base: paraphrase t=0.1 N=8 (2 chains); wikipedia_text t=0.5 N=8 (4 chains)."
    assert left_base in comp.summary
    assert "- Left out, only in sft: wikipedia_text t=0.5 N=4 (4 chains)." in comp.summary
    assert "without a partner, left out: 0 in base, 1 in sft." in comp.summary


def test_summary_text(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    line = next(x for x in comp.summary.splitlines() if x.startswith("- **math**"))
    overall = comp.overall[0]
    neutral, adversarial = (c for c in comp.by_category if c["domain"] == "math")
    assert line.startswith(
        f"- **math**: majority robustness 0.583 → 0.917 (+33.3 points [{overall['majority_ci_low']:+.1f}, "
        f"{overall['majority_ci_high']:+.1f}], 12 paired chains of 4 problems, Newcombe, clustered by problem; "
        "neutral +0.0 points "
        f"[{neutral['ci_low']:+.1f}, {neutral['ci_high']:+.1f}]; adversarial +50.0 points "
        f"[{adversarial['ci_low']:+.1f}, {adversarial['ci_high']:+.1f}])"
    )
    assert adversarial["ci_low"] < 50.0 < adversarial["ci_high"]  # each category's change has its own interval
    assert "clean accuracy 0.750 → 1.000 on 4 problems (+25.0 points [" in line
    assert "length overhead +25.0 % → +35.0 % (+10.0 points [" in line
    assert "], bootstrap)" in line  # the four chains with a length are four problems' t=0.1 chains
    assert "- Compared: base → sft." in comp.summary


def test_models_pair_by_name_when_both_runs_hold_several():
    rows = lambda model, ok: _chains(model, "paraphrase", 0.3, ok)  # noqa: E731
    before = RunOutcomes.from_records([*rows("m1", [0, 0, 0, 0]), *rows("m2", [1, 1, 1, 1]), *rows("m3", [1] * 4)])
    after = RunOutcomes.from_records([*rows("m2", [1, 1, 1, 1]), *rows("m1", [1, 1, 0, 0]), *rows("m4", [0] * 4)])
    comp = compute_comparison(before, after)
    assert comp.models == (("m1", "m1"), ("m2", "m2"))
    # m1 0 → 0.5 and m2 1 → 1, pooled over 8 paired chains: 0.5 → 0.75
    assert (comp.overall[0]["majority_before"], comp.overall[0]["majority_after"]) == (0.5, 0.75)
    assert {(m["side"], m["model"], m["chains"]) for m in comp.models_left_out} == {
        ("before", "m3", 4),
        ("after", "m4", 4),
    }
    assert "Models left out, only in before: m3 (4 chains)." in comp.summary


def test_nothing_shared_is_refused(before):
    other = RunOutcomes.from_records(_chains("sft", "random_characters", 0.9, [1, 0, 1, 0], n=4))
    with pytest.raises(NothingToCompare, match=r"share no \(domain, intervention, timestep, N\) cell") as err:
        compute_comparison(before, other)
    assert "\n" not in str(err.value) and "random_characters t=0.9 N=4 (4 chains)" in str(err.value)
    with pytest.raises(NothingToCompare, match="share no model"):
        compute_comparison(
            before,
            RunOutcomes.from_records(_chains("x", "paraphrase", 0.1, [1]) + _chains("y", "paraphrase", 0.1, [1])),
        )
    elsewhere = RunOutcomes.from_records(_chains("sft", "paraphrase", 0.1, [1, 1], problems=("q1", "q2")))
    with pytest.raises(NothingToCompare, match="no chain"):
        compute_comparison(before, elsewhere)
    with pytest.raises(NothingToCompare):
        compare_reports(RunOutcomes.from_records(), RunOutcomes.from_records())


def test_written_comparison(tmp_path, before, after):
    paths = write_comparison(before, after, tmp_path, labels=("base", "sft"))
    md = paths.markdown.read_text("utf-8")
    assert md.startswith("# Recovery comparison: base → sft")
    wrong = _by(compute_comparison(before, after).by_intervention, intervention="wrong_continuation")
    interval = f"[{wrong['ci_low']:+.1f}, {wrong['ci_high']:+.1f}]"
    row = f"| math | wrong_continuation | adversarial | 0.375 | 0.875 | +50.0 | {interval} | "
    assert row + "Newcombe, clustered by problem | 8 | 4 | 0 | 1 |" in md  # 8 chains: two timesteps of 4 problems
    assert "| base | base | math | paraphrase | 0.1 | 8 | 2 |" in md  # the left-out table
    assert "| math | 0.750 | 4 | [0.301, 0.954] | 1.000 | 4 | [0.510, 1.000] | +25.0 |" in md
    assert "## Majority robustness vs timestep" not in md  # only the comparison, not a full run report
    assert [p.name for p in paths.figures] == ["compare_math.png"]
    assert paths.figures[0].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    page = paths.html.read_text("utf-8")
    assert 'src="http' not in page and len(re.findall(r'src="data:image/png;base64,', page)) == 1
    assert "Run metadata — base" in md


def test_compare_without_clean_or_lengths_omits_them():
    b = RunOutcomes.from_records(_chains("m", "wikipedia_text", 0.3, [1, 0, 1, 0]))
    a = RunOutcomes.from_records(_chains("m", "wikipedia_text", 0.3, [1, 1, 1, 0]))
    comp = compute_comparison(b, a)
    line = comp.summary.splitlines()[2]
    o = comp.overall[0]
    assert line == (
        f"- **math**: majority robustness 0.500 → 0.750 (+25.0 points [{o['majority_ci_low']:+.1f}, "
        f"{o['majority_ci_high']:+.1f}], 4 paired chains of 4 problems, Newcombe; neutral +25.0 points "
        f"[{o['majority_ci_low']:+.1f}, "
        f"{o['majority_ci_high']:+.1f}])."
    )  # one category: its change and interval are the pooled ones
    assert comp.clean == () and math.isnan(comp.length[0]["delta"])
