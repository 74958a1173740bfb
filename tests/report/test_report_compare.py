"""Before/after comparison: hand-computed deltas, missing sides, written report."""

from __future__ import annotations

import math
import re

import pytest

from recovery.report import ReportData, compare_reports, compute_comparison, write_comparison


@pytest.fixture
def before(make_row) -> ReportData:
    return ReportData.from_dicts(
        [
            make_row("base", "math", "wrong_continuation", 0.1, 10, (0.5, 0.5, 0.2, 0.8), whole=(10.0, 1.0)),
            make_row("base", "math", "wrong_continuation", 0.5, 30, (0.7, 0.46, 0.5, 0.8), whole=(20.0, 1.0)),
            make_row("base", "math", "wikipedia_text", 0.1, 20, (0.9, 0.3, 0.8, 1.0), whole=(50.0, 1.0)),
            make_row("base", "math", "paraphrase", 0.1, 10, (0.8, 0.4, 0.5, 1.0), whole=(-60.0, 1.0)),
        ],
        clean=[{"model": "base", "domain": "math", "n": 100, "accuracy": 0.95}],
        meta={"models": ["base"], "seed": 0},
    )


@pytest.fixture
def after(make_row) -> ReportData:
    # The fine-tuned model has another name and no paraphrase run: pooling and missing sides are exercised.
    return ReportData.from_dicts(
        [
            make_row("sft", "math", "wrong_continuation", 0.1, 10, (0.9, 0.3, 0.7, 1.0), whole=(30.0, 1.0)),
            make_row("sft", "math", "wrong_continuation", 0.5, 30, (0.9, 0.3, 0.8, 1.0), whole=(40.0, 1.0)),
            make_row("sft", "math", "wikipedia_text", 0.1, 20, (0.95, 0.2, 0.9, 1.0), whole=(50.0, 1.0)),
        ],
        clean=[{"model": "sft", "domain": "math", "n": 100, "accuracy": 0.93}],
        meta={"models": ["sft"], "seed": 0},
    )


def _by(rows, **key):
    (row,) = [r for r in rows if all(r[k] == v for k, v in key.items())]
    return row


def test_deltas_hand_computed(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    wrong = _by(comp.by_intervention, intervention="wrong_continuation")
    # before (0.5·10 + 0.7·30)/40 = 0.65, after 0.9 → +25 points
    assert (wrong["before"], wrong["after"], wrong["delta"]) == pytest.approx((0.65, 0.9, 25.0))
    assert (wrong["chains_before"], wrong["chains_after"], wrong["category"]) == (40, 40, "adversarial")
    assert _by(comp.by_intervention, intervention="wikipedia_text")["delta"] == pytest.approx(5.0)
    para = _by(comp.by_intervention, intervention="paraphrase")  # only in the before run
    assert para["before"] == pytest.approx(0.8) and math.isnan(para["after"]) and math.isnan(para["delta"])
    # t=0.1: before (5 + 18 + 8)/40 = 0.775, after (9 + 19)/30 = 0.9333
    t01 = _by(comp.by_timestep, target_t=0.1)
    assert (t01["before"], t01["after"], t01["delta"]) == pytest.approx((0.775, 28 / 30, 100 * (28 / 30 - 0.775)))
    assert _by(comp.by_timestep, target_t=0.5)["delta"] == pytest.approx(20.0)
    assert _by(comp.by_category, category="adversarial")["delta"] == pytest.approx(25.0)
    assert math.isnan(_by(comp.by_category, category="benign")["after"])  # paraphrase only ran before
    # clean 0.95 → 0.93 = -2 points
    clean = _by(comp.clean, domain="math")
    assert (clean["delta"], clean["n_before"], clean["n_after"]) == (pytest.approx(-2.0), 100, 100)
    # length: wrong (10·10 + 20·30)/40 = 17.5 → (30·10 + 40·30)/40 = 37.5, +20 points
    assert _by(comp.length, intervention="wrong_continuation")["delta"] == pytest.approx(20.0)
    overall = _by(comp.overall, domain="math")
    # majority: (5 + 21 + 18 + 8)/70 → (9 + 27 + 19)/60
    assert overall["majority_delta"] == pytest.approx(100 * (55 / 60 - 52 / 70))
    # length: (100 + 600 + 1000 − 600)/70 = 15.714 → (300 + 1200 + 1000)/60 = 41.667
    assert overall["length_delta"] == pytest.approx(2500 / 60 - 1100 / 70)


def test_summary_text(before, after):
    comp = compute_comparison(before, after, ("base", "sft"))
    line = comp.summary.splitlines()[-1]
    assert line.startswith(
        "- **math**: majority robustness 0.743 → 0.917 (+17.4 points; benign –; neutral +5.0; adversarial +25.0)"
    )
    assert "clean accuracy 0.950 → 0.930 (-2.0 points)" in line
    assert "length overhead +15.7 % → +41.7 % (+26.0 points)" in line


def test_written_comparison(tmp_path, before, after):
    paths = write_comparison(before, after, tmp_path, labels=("base", "sft"))
    md = paths.markdown.read_text("utf-8")
    assert md.startswith("# Recovery comparison: base → sft")
    assert "| math | wrong_continuation | adversarial | 0.650 | 0.900 | +25.0 | 40 | 40 |" in md
    assert "| math | paraphrase | benign | 0.800 | – | – | 10 | 0 |" in md
    assert "| math | 0.950 | 0.930 | -2.0 |" in md
    assert "## Majority robustness vs timestep" not in md  # only the comparison, not a full run report
    assert [p.name for p in paths.figures] == ["compare_math.png"]
    assert paths.figures[0].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    page = paths.html.read_text("utf-8")
    assert 'src="http' not in page and len(re.findall(r'src="data:image/png;base64,', page)) == 1
    assert "Run metadata — base" in md


def test_compare_empty_runs(tmp_path):
    data = compare_reports(ReportData.from_dicts(), ReportData.from_dicts())
    assert data.standard is False
    comp = compute_comparison(ReportData.from_dicts(), ReportData.from_dicts())
    assert "nothing to compare" in comp.summary
    paths = write_comparison(ReportData.from_dicts(), ReportData.from_dicts(), tmp_path)
    assert "nothing to compare" in paths.markdown.read_text("utf-8") and paths.figures == ()


def test_compare_without_clean_or_lengths_omits_them(make_row):
    rows = [make_row("m", "logic", "wikipedia_text", 0.3, 4, (0.5, 0.5, 0.0, 1.0))]
    b = ReportData.from_dicts(rows)
    a = ReportData.from_dicts([make_row("m", "logic", "wikipedia_text", 0.3, 4, (0.75, 0.43, 0.25, 1.0))])
    line = compute_comparison(b, a).summary.splitlines()[-1]
    assert line == "- **logic**: majority robustness 0.500 → 0.750 (+25.0 points; neutral +25.0)."
