"""`recovery compare` on real toy run directories that measured different things: only shared cells are
compared, the rest is named, runs sharing nothing are refused, every change has a paired interval."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from typer.testing import CliRunner

from recovery.cli import app
from recovery.demo import DemoResult, Measurement, compare_demo_runs
from recovery.report.compare import NothingToCompare, RunOutcomes, compute_comparison
from recovery.run_dir import read_aggregates, read_clean_accuracy
from recovery.store import RunDir
from toy_runs import ToyRunSpec, build_toy_run

Z = 1.959963984540054
IVS = ("toy/paraphrase", "toy/wikipedia_text", "toy/wrong_continuation")
# N = 2 everywhere; A's continuations are one right and one wrong (no majority), B's both right.
RUN_A = ToyRunSpec(IVS, (0.3, 0.7), n_problems=4, variants=("teacher", "wrong_answer"), aggregate=True)
RUN_B = ToyRunSpec(IVS[1:], (0.3, 0.5), n_problems=4, variants=("teacher", "two_closes"), aggregate=True)
RUN_N3 = ToyRunSpec(IVS, (0.3, 0.7), n_problems=4, variants=("teacher", "wrong_answer", "two_closes"), aggregate=True)
RUN_OTHER = ToyRunSpec(("toy/random_characters",), (0.5,), n_problems=4, aggregate=True)
CLEAN_SET = ToyRunSpec(("toy/paraphrase",), (0.5,), n_problems=6, aggregate=True)

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(toy_run_for):
    return {
        name: toy_run_for(spec).path
        for name, spec in (("a", RUN_A), ("b", RUN_B), ("n3", RUN_N3), ("other", RUN_OTHER))
    }


def test_only_shared_cells_are_compared_and_the_rest_is_named(runs):
    comp = compute_comparison(runs["a"], runs["b"], ("A", "B"))
    cells = {(r["intervention"], r["target_t"], r["n"], r["pairs"]) for r in comp.by_cell}
    assert cells == {("toy/wikipedia_text", 0.3, 2, 4), ("toy/wrong_continuation", 0.3, 2, 4)}
    assert [r["target_t"] for r in comp.by_timestep] == [0.3]
    left = {(c["side"], c["intervention"], c["target_t"], c["chains"]) for c in comp.cells_left_out}
    assert left == {
        ("A", "toy/paraphrase", 0.3, 4),
        ("A", "toy/paraphrase", 0.7, 4),
        ("A", "toy/wikipedia_text", 0.7, 4),
        ("A", "toy/wrong_continuation", 0.7, 4),
        ("B", "toy/wikipedia_text", 0.5, 4),
        ("B", "toy/wrong_continuation", 0.5, 4),
    }
    assert "- Left out, only in A: toy/paraphrase t=0.3, 0.7 N=2 (8 chains); toy/wikipedia_text t=0.7" in comp.summary
    assert "- Left out, only in B: toy/wikipedia_text t=0.5 N=2 (4 chains)" in comp.summary
    overall = comp.overall[0]
    assert (overall["majority_before"], overall["majority_after"], overall["majority_pairs"]) == (0.0, 1.0, 8)


def test_every_change_has_a_paired_interval_containing_it(runs):
    comp = compute_comparison(runs["a"], runs["b"])
    majority = [*comp.by_intervention, *comp.by_category, *comp.by_timestep, *comp.by_cell, *comp.clean]
    majority += [{k[len("majority_") :]: v for k, v in o.items() if k.startswith("majority_")} for o in comp.overall]
    for r in majority:
        assert r["pairs"] > 0 and r["ci_low"] <= r["delta"] <= r["ci_high"] and r["ci_low"] < r["ci_high"], r
    for r in comp.length:  # the same continuations' lengths: a paired change of exactly 0
        assert r["pairs"] == 4 and r["ci_low"] <= r["delta"] <= r["ci_high"]


def test_interval_keeps_a_width_when_all_pairs_agree(runs):
    comp = compute_comparison(runs["a"], runs["a"])
    for r in comp.by_cell:  # every chain fails the majority in both: 4 agreeing pairs per cell
        assert r["delta"] == 0.0 and r["pairs"] == 4
        half = 100 * Z * Z / (4 + Z * Z)
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((-half, half))
    clean = comp.clean[0]  # every trace correct on both sides
    assert (clean["before_ci_low"], clean["before_ci_high"]) == pytest.approx((4 / (4 + Z * Z), 1.0))
    assert clean["ci_high"] - clean["ci_low"] > 90


def test_a_different_n_is_not_shared(runs):
    with pytest.raises(NothingToCompare, match="N=2.*N=3"):
        compute_comparison(runs["a"], runs["n3"])


@pytest.mark.parametrize("other", ["n3", "other"])
def test_cli_refuses_runs_that_share_nothing(runs, tmp_path, other):
    result = runner.invoke(app, ["compare", str(runs["a"]), str(runs[other]), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: nothing to compare") and result.output.count("\n") == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "cmp").exists()


def test_cli_compares_and_names_what_was_left_out(runs, tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", str(runs["a"]), str(runs["b"]), "--out", str(out), "--labels", "A,B"]
    result = runner.invoke(app, [*args, "--clean-before", str(runs["a"]), "--clean-after", str(runs["b"])])
    assert result.exit_code == 0, result.output
    assert "clean accuracy on the separate clean set 1.000 → 1.000 on 4 problems" in result.output
    assert "Left out, only in A: toy/paraphrase t=0.3, 0.7 N=2 (8 chains)" in result.output
    assert "Left out, only in B:" in result.output and f"report: {out / 'report.html'}" in result.output
    md = (out / "report.md").read_text("utf-8")
    assert "**Left out: measured in one run only**" in md
    assert "| B | tiny-reasoner | toy | toy/wikipedia_text | 0.5 | 2 | 4 |" in md
    half = runner.invoke(app, [*args, "--clean-before", str(runs["a"])])
    assert half.exit_code == 2 and "go together" in half.output


def test_clean_outcomes_are_read_per_problem(runs, tmp_path):
    outcomes = RunOutcomes.load(runs["a"])
    assert len(outcomes) == 3 * 2 * 4 and set(outcomes.chains["n"].tolist()) == {2}
    assert sorted(outcomes.clean["problem_id"].tolist()) == sorted({*outcomes.chains["problem_id"].tolist()})
    assert outcomes.clean["correct"].all()
    # A stored clean accuracy the filter's verdicts do not reproduce: no per-problem pairing, no interval.
    copy = tmp_path / "a"
    shutil.copytree(runs["a"], copy)
    RunDir(copy).file("clean_accuracy.json").write_text(
        json.dumps([{"model": "tiny-reasoner", "domain": "toy", "n": 4, "accuracy": 0.5}])
    )
    assert len(RunOutcomes.load(copy).clean["correct"]) == 0
    clean = compute_comparison(copy, runs["b"]).clean[0]
    assert (clean["before"], clean["pairs"], clean["delta"]) == (0.5, 0, 50.0) and math.isnan(clean["ci_low"])


def test_demo_comparison_shows_the_separate_clean_set(runs, tmp_path):
    for name, source in (("before", "a"), ("after", "b")):
        shutil.copytree(runs[source], tmp_path / name)
    for name in ("before-clean", "after-clean"):  # as the demo's: problems, traces and the filter only
        build_toy_run(tmp_path / name, CLEAN_SET)
        for table in ("chains", "continuations", "grades"):
            shutil.rmtree(tmp_path / name / table)
        (tmp_path / name / "aggregates.json").unlink()
    report = compare_demo_runs(tmp_path)
    comp, paths = report.comparison, report.paths
    (row,) = comp.clean_runs
    assert (row["n_before"], row["n_after"], row["pairs"], row["before"], row["after"]) == (6, 6, 6, 1.0, 1.0)
    assert (row["after_ci_low"], row["after_ci_high"]) == pytest.approx((6 / (6 + Z * Z), 1.0))
    assert row["ci_low"] < 0 < row["ci_high"]
    assert "clean accuracy on the separate clean set 1.000 → 1.000 on 6 problems (+0.0 points [" in comp.summary
    md = paths.markdown.read_text("utf-8")
    assert "**Clean accuracy (separate clean set)**" in md and "| toy | 1.000 | 6 | [0.610, 1.000] |" in md
    # Doubt after the intervention at each stage (no GRPO here: base and SFT), with each stage's baseline.
    assert "Doubt after the intervention, by training stage" in md and "What GRPO adds" not in md
    assert [line.split(":")[0] for line in report.doubt_lines] == ["base", "SFT"]
    assert all("vs clean baseline" in line for line in report.doubt_lines)
    assert report.grpo_comparison is None
    measured = [
        Measurement(
            tmp_path / n, None, read_aggregates(RunDir(tmp_path / n)), read_clean_accuracy(RunDir(tmp_path / n))
        )
        for n in ("before", "after")
    ]
    result = DemoResult(
        before=measured[0],
        after=measured[1],
        clean_before=1.0,
        clean_after=1.0,
        clean_n_before=6,
        clean_n_after=6,
        comparison=comp,
    )
    caption = result.summary_table().caption
    assert "on more problems before: 100.0% of 6 [61.0%, 100.0%], after: 100.0% of 6" in caption
    assert "paired over 6 problems" in caption
