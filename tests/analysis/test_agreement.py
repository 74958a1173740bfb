"""recovery.analysis.agreement: detector metrics against labels, Cohen's κ, label files, the validation section.

Expected numbers are computed by hand in the comments; sklearn is only a cross-check on random labels.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from recovery.analysis.agreement import (
    LabeledSentence,
    agreement,
    binary_metrics,
    cohen_kappa,
    load_labels,
    validate,
    validation_section,
)
from recovery.analysis.doubt_judge import DoubtJudge, LexicalDetector

LABELS_FILE = Path(__file__).resolve().parents[2] / "bench" / "data" / "doubt_labels_real_traces.jsonl"


def test_binary_metrics_hand_computed():
    # 3 doubtful, 7 not; the detector finds 2 of the 3 and raises 1 false alarm.
    labels = [True, True, True, False, False, False, False, False, False, False]
    pred = [True, True, False, True, False, False, False, False, False, False]
    m = binary_metrics(labels, pred)
    assert (m.tp, m.fp, m.fn, m.tn, m.n) == (2, 1, 1, 6, 10)
    assert m.accuracy == pytest.approx(0.8)
    assert m.doubt.precision == pytest.approx(2 / 3) and m.doubt.recall == pytest.approx(2 / 3)
    assert m.doubt.f1 == pytest.approx(2 / 3) and m.doubt.support == 3
    assert m.no_doubt.precision == pytest.approx(6 / 7) and m.no_doubt.recall == pytest.approx(6 / 7)
    assert m.no_doubt.support == 7
    # p_o = 0.8; both raters say "doubt" 30% of the time: p_e = 0.3·0.3 + 0.7·0.7 = 0.58; κ = 0.22 / 0.42
    assert m.kappa == pytest.approx(0.22 / 0.42)


def test_kappa_hand_computed_cases():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    # p_o = 0, p_e = 0.5·0.5 + 0.5·0.5 = 0.5 → κ = −1
    assert cohen_kappa([True, False, True, False], [False, True, False, True]) == -1.0
    # p_o = 0.5, pa = 0.5, pb = 1 → p_e = 0.5 → κ = 0
    assert cohen_kappa([True, False, True, False], [True, True, True, True]) == 0.0
    # both constant and equal: chance agreement is 1, κ undefined
    assert math.isnan(cohen_kappa([False, False], [False, False]))


def test_undefined_ratios_are_nan_not_zero():
    m = binary_metrics([True, False, False], [False, False, False])  # "doubt" never predicted
    assert math.isnan(m.doubt.precision) and m.doubt.recall == 0.0 and math.isnan(m.doubt.f1)
    m = binary_metrics([False, False], [True, False])  # no doubtful sentence in the labels
    assert math.isnan(m.doubt.recall) and m.doubt.precision == 0.0


def test_matches_sklearn_on_random_labels():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(7)
    for trial in range(20):
        n = rng.randint(5, 200)
        p_true, p_pred = rng.random(), rng.random()
        labels = [rng.random() < p_true for _ in range(n)]
        pred = [rng.random() < p_pred for _ in range(n)]
        if len(set(labels)) < 2 or len(set(pred)) < 2:
            continue  # sklearn warns and substitutes 0 where we return NaN; compared above
        m = binary_metrics(labels, pred)
        p, r, f, s = sklearn_metrics.precision_recall_fscore_support(
            labels, pred, labels=[True, False], zero_division=0
        )
        assert m.accuracy == pytest.approx(sklearn_metrics.accuracy_score(labels, pred))
        assert m.kappa == pytest.approx(sklearn_metrics.cohen_kappa_score(labels, pred)), trial
        assert (m.doubt.precision, m.doubt.recall, m.doubt.f1) == pytest.approx((p[0], r[0], f[0]))
        assert (m.no_doubt.precision, m.no_doubt.recall, m.no_doubt.f1) == pytest.approx((p[1], r[1], f[1]))
        assert (m.doubt.support, m.no_doubt.support) == (s[0], s[1])


def test_agreement_between_two_detectors():
    a = [True, True, False, False, False]
    b = [True, False, False, False, True]
    agr = agreement(a, b)
    # p_o = 3/5; pa = pb = 0.4 → p_e = 0.16 + 0.36 = 0.52 → κ = 0.08 / 0.48
    assert agr.n == 5 and agr.accuracy == pytest.approx(0.6) and agr.kappa == pytest.approx(0.08 / 0.48)
    assert (agr.rate_a, agr.rate_b) == (0.4, 0.4)


@pytest.mark.parametrize(
    "a,b,error",
    [([True], [True, False], ValueError), ([], [], ValueError), ([1, 0], [True, False], TypeError)],
)
def test_bad_inputs_are_refused(a, b, error):
    with pytest.raises(error):
        binary_metrics(a, b)


# -- label files ---------------------------------------------------------------------------------------------


def test_load_labels_reads_and_validates(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"text": "Wait, no.", "label": true, "source_line": 3, "how": "hand"}\n\n'
        '{"text": "So x = 2.", "label": false}\n'
    )
    assert load_labels(good) == [LabeledSentence("Wait, no.", True, 3, "hand"), LabeledSentence("So x = 2.", False)]
    cases = {
        '{"text": "a", "label": "yes"}': r"bad\.jsonl:2: 'label' must be true or false",
        '{"label": true}': r"bad\.jsonl:2: 'text' must be a non-empty string",
        "not json": r"bad\.jsonl:2: not JSON",
        '{"text": "a", "label": true, "source_line": "x"}': r"bad\.jsonl:2: 'source_line' must be an integer",
        "[1]": r"bad\.jsonl:2: expected an object",
    }
    for line, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"text": "fine", "label": false}\n' + line + "\n")
        with pytest.raises(ValueError, match=message):
            load_labels(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no labels"):
        load_labels(empty)
    with pytest.raises(ValueError, match="not found"):
        load_labels(tmp_path / "missing.jsonl")


def test_shipped_label_set_is_balanced_and_traceable(shared_data):
    from recovery.doubt import split_sentences
    from recovery.segment import split_reasoning

    labels = load_labels(LABELS_FILE)
    assert 280 <= len(labels) <= 320
    n_doubt = sum(s.label for s in labels)
    assert n_doubt >= 100 and len(labels) - n_doubt >= 100  # both classes well represented
    assert len({s.text for s in labels}) == len(labels)
    assert sum(s.how.startswith("uniform") for s in labels) == 150
    rows = (shared_data / "real_traces" / "thought_anchors_math_cots.jsonl").read_text(encoding="utf-8").splitlines()
    for s in labels:  # every sentence is one the project's splitter produces from the trace it names
        reasoning = split_reasoning(json.loads(rows[s.source_line - 1])["solution"]).reasoning
        assert s.text in split_sentences(reasoning), (s.source_line, s.text)


# -- detectors against labels --------------------------------------------------------------------------------


class ScriptedChat:
    """A text generator standing in for an LLM judge (no LLM runs here): replies from a script keyed by a
    word of the sentence, "Maybe" otherwise."""

    def __init__(self, script: dict[str, str]):
        self.script = script

    def __call__(self, messages, decoding):
        user = messages[-1].content
        return next((reply for word, reply in self.script.items() if word in user), "Maybe")


def test_validate_scores_each_detector_and_their_agreement():
    labels = [
        LabeledSentence("Wait, no.", True),  # lexical: yes; judge: Yes
        LabeledSentence("So that solution is invalid.", True),  # lexical: no; judge: Yes
        LabeledSentence("Hmm, so x = 3.", False),  # lexical: yes (hmm); judge: No
        LabeledSentence("x = 3 + 4 = 7.", False),  # lexical: no; judge: unparseable → skipped
    ]
    judge = DoubtJudge(ScriptedChat({"Wait": "Yes", "invalid": "Yes.", "Hmm": "No"}))
    v = validate(labels, [LexicalDetector(), judge])
    assert v.n_labels == 4 and v.n_doubt == 2
    lex, jud = v.results["lexical"], v.results["judge"]
    assert (lex.tp, lex.fp, lex.fn, lex.tn) == (1, 1, 1, 1) and lex.accuracy == 0.5 and lex.kappa == 0.0
    assert jud.n == 3 and (jud.tp, jud.fp, jud.fn, jud.tn) == (2, 0, 0, 1) and jud.kappa == 1.0
    assert v.skipped == {"lexical": 0, "judge": 1} and judge.skips == {"no_yes_or_no": 1}
    a, b, agr = v.pair
    # on the 3 sentences both judged: lexical [T, F, T] vs judge [T, T, F] → p_o = 1/3
    assert (a, b, agr.n) == ("lexical", "judge", 3) and agr.accuracy == pytest.approx(1 / 3)
    section = validation_section(v, labels, labels_name="four.jsonl")
    assert section.title == "Doubt detector validation"
    assert "judge: 1 sentence(s) without a usable verdict" in section.markdown
    titles = [t.title for t in section.tables]
    assert titles == ["Detector vs reference labels", "Agreement: lexical vs judge", "Misclassified sentences"]
    metrics = {row[0]: row[1:] for row in section.tables[0].rows}
    assert metrics["Accuracy"] == ("50.0%", "100.0%") and metrics["TP / FP / FN / TN"] == (
        "1 / 1 / 1 / 1",
        "2 / 0 / 0 / 1",
    )


def test_validate_refuses_a_detector_with_no_verdict():
    with pytest.raises(ValueError, match="no usable verdict"):
        validate([LabeledSentence("Wait.", True)], [DoubtJudge(ScriptedChat({}))])


def test_doubt_validate_cli_stores_the_section(tmp_path):
    from typer.testing import CliRunner

    from recovery.cli import app
    from recovery.pipeline import DatasetConfig, RunConfig, run_pipeline

    run_dir = tmp_path / "run"
    run_pipeline(
        RunConfig(run_dir=str(run_dir), dataset=DatasetConfig(name="toy", limit=2)), stages=["problems"], progress=False
    )
    result = CliRunner().invoke(app, ["analyze", "doubt-validate", str(LABELS_FILE), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    stored = json.loads((run_dir / "analysis" / "doubt_validation" / "metrics.json").read_text())
    labels = load_labels(LABELS_FILE)
    expected = binary_metrics([s.label for s in labels], [LexicalDetector()(s.text) for s in labels])
    assert stored["metrics"]["lexical"]["accuracy"] == pytest.approx(expected.accuracy)
    assert f"{expected.accuracy:.3f}" in result.output and f"{expected.kappa:.3f}" in result.output
    assert stored["n_labels"] == len(labels) and stored["agreement"] is None
    predictions = (run_dir / "analysis" / "doubt_validation" / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) == len(labels)
    assert "Doubt detector validation" in (run_dir / "report" / "report.md").read_text()
    bad = CliRunner().invoke(app, ["analyze", "doubt-validate", str(tmp_path / "nope.jsonl")])
    assert bad.exit_code == 2 and "label file not found" in bad.output
