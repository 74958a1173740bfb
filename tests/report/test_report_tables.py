"""Table cells, ordering and input normalisation of the report."""

from __future__ import annotations

import doctest
import json
import math

import pytest

from recovery.metrics import ChainOutcome, aggregate
from recovery.report import ReportData, category_of, fmt, tables
from recovery.report.data import pooled


def _rows_of(md: str, title: str) -> list[str]:
    """The body lines of the Markdown table titled ``title``."""
    lines = md.splitlines()
    start = lines.index(f"**{title}**") + 4  # title, blank, header, separator
    out = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        out.append(line)
    return out


def test_fmt_doctests():
    assert doctest.testmod(fmt).failed == 0


def test_detail_table_cells_like_tables_18_to_20(small_data):
    md = tables.to_markdown(tables.detail_table(small_data, "math"))
    row = "| m1 | wikipedia_text (neutral) | 0.1 | 20 | 1.000 ± 0.000 | 0.932 ± 0.251 | 0.750 ± 0.433 | [0.900, 0.960] | +12.5 ± 3.0 |"
    assert row in md.splitlines()
    # Header names the CI level; models follow meta["models"] (m2 first); a NaN cell is a dash.
    assert "| Model | Intervention | t | Chains | At least once | Majority | All | Majority 95% CI | Length Δ % |" in md
    assert md.index("| m2 |") < md.index("| m1 |")
    assert "| m2 | complete_step (benign) | 0.5 | 10 | – | – | – | – | – |" in md
    assert "nan" not in md.lower()


def test_majority_pivot_weights_mean_by_chains_and_marks_missing(small_data):
    body = _rows_of(
        tables.to_markdown(tables.majority_pivot(small_data, "m1", "math")), "Majority robustness of m1 — math"
    )
    # Category order: benign, neutral, adversarial. wrong_continuation mean = (0.5·10 + 0.9·30) / 40 = 0.8.
    assert body == [
        "| complete_step (benign) | 1.000 | 1.000 | 1.000 |",
        "| wikipedia_text (neutral) | 0.932 | 1.000 | 0.966 |",
        "| wrong_continuation (adversarial) | 0.500 | 0.900 | 0.800 |",
    ]
    m2 = tables.to_markdown(tables.majority_pivot(small_data, "m2", "math"))
    assert "| wikipedia_text (neutral) | 0.800 | – | 0.800 |" in m2


def test_length_tables_5_and_6(small_data):
    by_model = _rows_of(
        tables.to_markdown(tables.length_by_model(small_data, "math")),
        "CoT length change (%) by model and intervention — math",
    )
    # m1 wrong: (10·10 + 20·30)/40 = 17.5; m2 wrong: only t=0.1 has a length → 30.
    assert by_model == ["| m2 | +2.0 | +40.0 | +30.0 |", "| m1 | +2.0 | +3.8 | +17.5 |"]
    by_t = _rows_of(
        tables.to_markdown(tables.length_by_timestep(small_data, "math")),
        "CoT length change (%) by timestep and intervention — math",
    )
    # t=0.1 wikipedia: (12.5·20 + 40·10)/30 = 21.67; wrong: (10·10 + 30·10)/20 = 20.
    assert by_t == ["| 0.1 | +1.5 | +21.7 | +20.0 |", "| 0.5 | +3.0 | -5.0 | +20.0 |"]
    header = tables.to_markdown(tables.length_by_model(small_data, "math")).splitlines()[2]
    assert header == "| Model | benign: complete_step | neutral: wikipedia_text | adversarial: wrong_continuation |"


def test_clean_skips_and_metadata_tables(small_data):
    md = "\n\n".join(
        tables.to_markdown(t)
        for t in (
            tables.clean_table(small_data),
            tables.skips_table(small_data.skips),
            tables.metadata_table(small_data.meta),
        )
    )
    assert "| m1 | math | 100 | 0.950 |" in md
    assert "| continuations | empty\\|generation | 2 |" in md  # a pipe in a cell is escaped
    assert "| total |  | 5 |" in md
    assert "| config.decoding.temperature | 0.6 |" in md
    assert "| models | m2, m1 |" in md


def test_categories_order_and_overrides(make_row):
    assert category_of("wikipedia_text") == "neutral"
    assert category_of("toy/wrong_continuation") == "adversarial"
    assert category_of("my_new_thing") == "other"
    rows = [make_row("m", "d", n, 0.1) for n in ("zzz", "unrelated_cot", "paraphrase", "random_characters", "aaa")]
    data = ReportData.from_dicts(rows)
    assert data.interventions() == ["paraphrase", "random_characters", "unrelated_cot", "aaa", "zzz"]
    # A category column in the rows, then an explicit override, beat the registry.
    data = ReportData.from_dicts([make_row("m", "d", "aaa", 0.1, category="benign")], categories={"zzz": "neutral"})
    assert data.category("aaa") == "benign" and data.category("zzz") == "neutral"


def test_from_dicts_accepts_aggregate_rows_and_normalises():
    outcomes = [
        ChainOutcome(f"c{i}", "m", "math", "wikipedia_text", "neutral", 0.3, 8, k, 10.0 * i, None)
        for i, k in enumerate([8, 5, 2, 8])
    ]
    agg = aggregate(outcomes, n_boot=200)
    from_objects = ReportData.from_dicts(agg)
    from_dicts = ReportData.from_dicts([r.flat() for r in agg])
    assert from_objects.rows == from_dicts.rows
    row = from_objects.rows[0]
    assert row["majority_mean"] == 0.75 and row["n_chains"] == 4
    assert math.isnan(row["remaining_pct_mean"])  # no values → NaN, shown as a dash
    # None becomes NaN; a string timestep becomes a float.
    r = ReportData.from_dicts([{"intervention": "x", "target_t": "0.5", "majority_mean": None}]).rows[0]
    assert r["target_t"] == 0.5 and math.isnan(r["majority_mean"]) and r["model"] == "all" and r["n_chains"] == 0


def test_from_dicts_refuses_bad_rows(make_row):
    with pytest.raises(ValueError, match="target_t"):
        ReportData.from_dicts([{"intervention": "x"}])
    with pytest.raises(ValueError, match="share"):
        ReportData.from_dicts([make_row("m", "d", "x", 0.1), make_row("m", "d", "x", 0.1)])
    with pytest.raises(ValueError, match="accuracy"):
        ReportData.from_dicts(clean=[{"model": "m"}])


def test_to_dict_round_trip(small_data):
    again = ReportData.from_dict(json.loads(json.dumps(small_data.to_dict())))
    assert again.meta == small_data.meta and again.skips == small_data.skips and again.clean == small_data.clean
    assert tables.to_markdown(tables.detail_table(again, "math")) == tables.to_markdown(
        tables.detail_table(small_data, "math")
    )


def test_pooled_skips_missing(small_rows):
    rows = small_rows
    assert pooled(rows[:2], "majority_mean") == pytest.approx(0.8)
    assert math.isnan(pooled([rows[-1]], "majority_mean"))
    assert math.isnan(pooled([], "majority_mean"))
