"""Doubt after the intervention by training stage: the rates come from the stages' own counts, split by
recovered vs not, each stage against its own clean baseline, and the paraphrase verdict reads them."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from recovery.analysis.doubt_result import DoubtResult
from recovery.analysis.doubt_stages import StageDoubt, doubt_rows, doubt_stages_lines, doubt_stages_section


def result(cells: dict, windows: dict, baseline: tuple[int, int]) -> DoubtResult:
    """Counts of one stage: ``cells[(intervention, category, recovered, index)] = (sentences, doubtful)``."""
    return DoubtResult(
        detector="lexical",
        sentences=2,
        seed=0,
        cells={("m", iv, cat, rec, i): list(v) for (iv, cat, rec, i), v in cells.items()},
        windows=Counter({("m", iv, cat, rec): n for (iv, cat, rec), n in windows.items()}),
        baseline={("m", 1): list(baseline)},
    )


BASE = result(
    {
        ("toy/paraphrase", "benign", True, 1): (10, 1),
        ("toy/paraphrase", "benign", True, 2): (10, 0),
        ("toy/wrong_continuation", "adversarial", False, 1): (8, 0),
    },
    {("toy/paraphrase", "benign", True): 10, ("toy/wrong_continuation", "adversarial", False): 8},
    baseline=(100, 15),
)
TRAINED = result(
    {
        ("toy/paraphrase", "benign", True, 1): (10, 2),
        ("toy/wrong_continuation", "adversarial", True, 1): (6, 6),
        ("toy/wrong_continuation", "adversarial", False, 1): (2, 0),
    },
    {
        ("toy/paraphrase", "benign", True): 10,
        ("toy/wrong_continuation", "adversarial", True): 6,
        ("toy/wrong_continuation", "adversarial", False): 2,
    },
    baseline=(100, 10),
)


def test_rows_split_doubt_by_recovery_against_each_stages_baseline():
    stages = [StageDoubt("base", BASE), StageDoubt("SFT", TRAINED)]
    rows = {(r["intervention"], r["stage"]): r for r in doubt_rows(stages)}
    wrong = rows[("toy/wrong_continuation", "SFT")]
    assert (wrong["continuations"], wrong["recovered"]) == (8, 0.75)
    assert (wrong["doubt"], wrong["doubt_recovered"], wrong["doubt_not_recovered"]) == (0.75, 1.0, 0.0)
    assert (wrong["sentences_recovered"], wrong["sentences_not_recovered"], wrong["baseline"]) == (6, 2, 0.10)
    before = rows[("toy/wrong_continuation", "base")]
    assert before["recovered"] == 0.0 and math.isnan(before["doubt_recovered"])
    assert rows[("toy/paraphrase", "base")]["doubt"] == pytest.approx(0.05) and before["baseline"] == 0.15


def test_lines_say_whether_paraphrase_is_below_the_baseline_and_the_section_draws():
    stages = [StageDoubt("base", BASE), StageDoubt("SFT", TRAINED)]
    base, sft = doubt_stages_lines(stages)
    assert base.startswith("base: doubt after the intervention 0.036 over 28 sentences")
    assert "vs clean baseline 0.150; toy/paraphrase 0.050, below the baseline" in base
    assert "toy/paraphrase 0.200, not below the baseline" in sft
    section = doubt_stages_section(stages)
    assert section.figures and section.figures[0].png_bytes.startswith(b"\x89PNG")
    assert len(section.tables[0].rows) == 4 + 2  # (intervention, stage) rows, then one pooled row per stage
    empty = doubt_stages_section([StageDoubt("base", DoubtResult(detector="lexical", sentences=2, seed=0))])
    assert "No stage has doubt counts" in empty.markdown


def test_paraphrase_verdict_does_not_read_a_doubt_free_or_missing_baseline_as_no_suppression():
    """A stage that never doubts in its clean traces (baseline 0), or has no baseline at all, cannot show
    suppression; the line says so rather than "not below the baseline"."""
    cells = {("toy/paraphrase", "benign", True, 1): (10, 0)}
    windows = {("toy/paraphrase", "benign", True): 10}
    (silent,) = doubt_stages_lines([StageDoubt("SFT", result(cells, windows, baseline=(100, 0)))])
    assert silent.endswith("toy/paraphrase 0.000, the clean baseline has no doubt, so suppression cannot show")
    (unmeasured,) = doubt_stages_lines([StageDoubt("SFT", result(cells, windows, baseline=(0, 0)))])
    assert unmeasured.endswith("toy/paraphrase 0.000, no rate to compare with the baseline")
