"""Length overhead and robustness against the authors' code (issue 29, part ``length``; data: make_metrics.py).

Their scripts/length_overhead.py (``--remove-intervention-text``, characters) measures each completion's
complete answer (prefix, separator, stripped continuation) less the intervention text against the whole
original response; scripts/compute_metrics.py reads K of N from the judge's scores. Under ``protocol:
reference`` this project's tallies and aggregates give their numbers; the project's default measure
(reasoning only, inserted characters only) gives others.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recovery.metrics import complete_answer, reference_length_change, robustness, separator_for
from recovery.pipeline.aggregate import aggregate_run
from recovery.plan import LengthMeasure
from recovery.plan.styles.authors import WholeResponseLength
from recovery.run_dir import chain_tallies, read_aggregates
from reference.inputs import AUTHORS_NAMES
from reference.metrics_run import build_run, continuation_texts, data, intervened, sha

TRACES = {t["id"]: t for t in data()["traces"]}


def test_complete_answers_are_the_authors():
    for chain in data()["chains"]:
        answers = [complete_answer(chain["prefix"], text) for text in continuation_texts(chain)]
        assert [sha(a) for a in answers] == chain["complete_answers_sha256"]
    assert [separator_for(p) for p in ("a\n\n", "a\n", "a", "")] == ["", "\n", "\n\n", "\n\n"]


def test_each_completions_length_change_is_the_authors():
    checked = 0
    for chain in data()["chains"]:
        original = TRACES[chain["trace_id"]]["answer_content"]
        for text, completion in zip(continuation_texts(chain), chain["completions"], strict=True):
            ours = reference_length_change(chain["prefix"], chain["intervention_text"], text, original)
            assert ours == completion["percent_change"]  # the same float: their operation order
            # A continuation stored unstripped (another backend's spacing) measures the same.
            assert (
                reference_length_change(chain["prefix"], chain["intervention_text"], f"\n {text} \n", original) == ours
            )
            checked += 1
    assert checked == 140 * 7


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics-runs")
    return {style: build_run(root / style, style) for style in ("reference", "default")}


def _by_chain(tallies) -> dict[str, int]:
    return {tallies.ids[i].as_py(): i for i in range(len(tallies))}


def test_chain_tallies_under_reference_give_the_authors_length_and_robustness(runs):
    tallies = chain_tallies(runs["reference"])
    position = _by_chain(tallies)
    for chain in data()["chains"]:
        i = position[intervened(chain, TRACES[chain["trace_id"]]).id]
        theirs = np.mean([c["percent_change"] for c in chain["completions"]])
        assert tallies.whole_pct[i] == pytest.approx(theirs, abs=1e-9)
        r = chain["robustness"]
        assert (int(tallies.k[i]), int(tallies.n[i])) == (r["k_correct"], r["n"])
        levels = robustness(int(tallies.k[i]), int(tallies.n[i]))
        assert (levels.at_least_once, levels.majority, levels.all) == (
            bool(r["at_least_once_robust"]),
            bool(r["majority_robust"]),
            bool(r["all_robust"]),
        )
    assert {chain["robustness"]["majority_robust"] for chain in data()["chains"]} == {0, 1}  # both outcomes met


def test_the_default_measure_differs_from_the_authors(runs):
    """The project's measure (reasoning only, the inserted characters only) is another number for every chain;
    the style is read from the run's manifest, and can be asked for explicitly."""
    theirs = {
        intervened(c, TRACES[c["trace_id"]]).id: np.mean([x["percent_change"] for x in c["completions"]])
        for c in data()["chains"]
    }
    for run, length in ((runs["default"], None), (runs["reference"], LengthMeasure())):
        tallies = chain_tallies(run, length=length)
        position = _by_chain(tallies)
        differs = [not math.isclose(tallies.whole_pct[position[cid]], pct, abs_tol=1e-6) for cid, pct in theirs.items()]
        assert all(differs)
    assert np.allclose(
        chain_tallies(runs["default"], length=WholeResponseLength()).whole_pct,
        chain_tallies(runs["reference"]).whole_pct,
    )


def test_aggregates_under_reference_are_the_authors_group_means(runs):
    aggregate_run(runs["reference"], n_boot=50, seed=0)
    rows = {(r["intervention"], r["target_t"]): r for r in read_aggregates(runs["reference"])}
    ours_name = {v: k for k, v in AUTHORS_NAMES.items()}
    means = data()["length_group_means"]
    assert len(means) == len(rows) == 35
    for group in means:
        row = rows[(ours_name[group["intervention"]], group["t"])]
        # The same floats as their pandas mean and std over the group's completions (issue 35: `==`).
        assert (row["whole_pct_mean"], row["whole_pct_std"]) == (group["mean"], group["std"])
    robustness = data()["robustness_group_means"]
    assert len(robustness) == 35
    for group in robustness:
        row = rows[(ours_name[group["intervention"]], group["t"])]
        assert row["n_chains"] == group["num_items"]
        for level in ("at_least_once", "majority", "all"):
            assert row[f"{level}_mean"] == group[f"{level}_robustness"]


def test_robustness_drops_missing_scores_like_the_authors():
    """Their ``robustness_from_scores`` drops a missing score (N counts the scores); this project's N counts
    the stored grades, and a continuation without a grade has none. With no score at all they report 0 on
    every level; this project leaves such a chain out of the aggregates (no grades, no chain)."""
    for case in data()["robustness_with_gaps"]:
        scores = [s for s in case["scores"] if s is not None]
        assert (sum(scores), len(scores)) == (case["k_correct"], case["n"])
        if not scores:
            assert (case["at_least_once_robust"], case["majority_robust"], case["all_robust"]) == (0, 0, 0)
            continue
        levels = robustness(sum(scores), len(scores))
        assert (levels.at_least_once, levels.majority, levels.all) == (
            bool(case["at_least_once_robust"]),
            bool(case["majority_robust"]),
            bool(case["all_robust"]),
        )
