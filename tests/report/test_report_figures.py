"""What a reader of a real run's HTML report sees in its figures and tables.

The run is a toy run (`toy_runs`) with the seven toy interventions where each chain has one correct and one
wrong continuation: majority and all robustness are 0 in every cell, at-least-once robustness is 1. Checks are
on the matplotlib artists behind the report's PNGs (positions in pixels, font sizes, colours) and on the page:

* a robustness of 0 (or 1) is drawn inside the frame, not hidden under the category-coloured spine;
* text stays at least `MIN_TEXT_PX` tall at the width the page shows a figure (`EMBED_WIDTH_PX`);
* legends lie inside the PNG;
* lines per intervention take the category colours of the rest of the report;
* every table, Markdown tables included, sits in a horizontally scrolling wrapper.
"""

from __future__ import annotations

import io
import re
import shutil

import numpy as np
import pytest
from matplotlib.text import Text
from PIL import Image

from recovery.analysis.activation_probes.report import draw_probe_figure
from recovery.analysis.cli_doubt import doubt_analysis, rerender_report
from recovery.analysis.doubt_figures import draw_doubt_figures
from recovery.report import ReportData, Section
from recovery.report import figures as rfig
from recovery.report.compare import compute_comparison
from recovery.report.compare_section import comparison_figure
from recovery.report.figures import DPI, EMBED_WIDTH_PX, category_color, draw_levels, draw_majority, to_png
from recovery.report.run_report import run_report_data
from recovery.report.sections_store import save_section
from recovery.run_dir import open_run
from toy_runs import ToyRunSpec

MIN_TEXT_PX = 9.0
IVS = (
    "toy/complete_step",
    "toy/paraphrase",
    "toy/random_characters",
    "toy/wikipedia_text",
    "toy/wrong_continuation",
    "toy/hallucinated_fact",
    "toy/unrelated_cot",
)
HALF = ToyRunSpec(IVS, (0.3, 0.7), n_problems=4, variants=("teacher", "wrong_answer"), aggregate=True)
ALL_RIGHT = ToyRunSpec(IVS, (0.3, 0.7), n_problems=4, variants=("teacher", "two_closes"), aggregate=True)
WIDE_COLUMNS = [f"adversarial: toy/hallucinated_fact, variant {i}" for i in range(10)]


@pytest.fixture(scope="module")
def built(toy_run_for, tmp_path_factory):
    """A copy of the HALF toy run with the doubt analysis (lexical detector) and a stored section holding a
    wide Markdown table, its report written (``report/report.html``); the run's path and the doubt result."""
    path = tmp_path_factory.mktemp("figures") / "run"
    shutil.copytree(toy_run_for(HALF).path, path)
    result, _ = doubt_analysis(path, progress=False)
    wide = "| model | " + " | ".join(WIDE_COLUMNS) + " |\n|---|" + "---|" * len(WIDE_COLUMNS) + "\n"
    wide += "| tiny-reasoner | " + " | ".join("0.000" for _ in WIDE_COLUMNS) + " |"
    save_section(path, "wide", Section("A stored wide table", "One column per variant.", tables=(wide,)))
    rerender_report(path)
    return path, result


@pytest.fixture(scope="module")
def run(built):
    return built[0]


@pytest.fixture(scope="module")
def doubt(built):
    return built[1]


@pytest.fixture(scope="module")
def data(run) -> ReportData:
    opened = open_run(run)
    return run_report_data(opened, opened.config)


@pytest.fixture(scope="module")
def page(run) -> str:
    return (run / "report" / "report.html").read_text("utf-8")


def _points_px(ax, line) -> np.ndarray:
    return ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))


def _assert_inside_frame(ax, line) -> None:
    """Every marker of ``line`` lies wholly inside ``ax``'s frame, clear of its spines."""
    ys = _points_px(ax, line)[:, 1]
    margin = line.get_markersize() * DPI / 72 / 2 + max(s.get_linewidth() for s in ax.spines.values()) * DPI / 72 / 2
    assert (ys - ax.bbox.y0 >= margin).all(), (ax.get_title(), ax.get_ylim())
    assert (ax.bbox.y1 - ys >= margin).all(), (ax.get_title(), ax.get_ylim())


def test_the_toy_run_has_zero_and_perfect_robustness(data):
    rows = data.select(domain="toy")
    assert len(rows) == len(IVS) * 2
    assert {r["majority_mean"] for r in rows} == {r["all_mean"] for r in rows} == {0.0}
    assert {r["at_least_once_mean"] for r in rows} == {1.0}


def test_zero_robustness_is_drawn_inside_the_frame(data):
    """Zero sat exactly on the bottom spine (y-limits from 0), so wrong_continuation's panels looked empty."""
    majority, levels = draw_majority(data, "toy"), draw_levels(data, "toy")
    for fig, zero_lines, one_lines in ((majority, len(IVS), 0), (levels, 2 * len(IVS), len(IVS))):
        to_png(fig)  # lay out and draw, as the report does
        drawn = [(ax, line) for ax in fig.axes for line in ax.get_lines()]
        zeros = [(ax, line) for ax, line in drawn if set(line.get_ydata()) == {0.0}]
        ones = [(ax, line) for ax, line in drawn if set(line.get_ydata()) == {1.0}]
        assert (len(zeros), len(ones)) == (zero_lines, one_lines)
        for ax, line in zeros + ones:
            assert ax.get_ylim()[0] < 0.0 < 1.0 < ax.get_ylim()[1]
            _assert_inside_frame(ax, line)


def test_zero_doubt_rates_are_drawn_inside_the_frame(doubt):
    figs = draw_doubt_figures(doubt)
    zeros = 0
    for fig in figs.values():
        to_png(fig)
        for ax in fig.axes:
            for line in ax.get_lines():
                ys = np.asarray(line.get_ydata(), dtype=float)
                if line.get_marker() not in (None, "None", "") and np.nanmin(ys) == 0.0:
                    zeros += 1
                    assert ax.get_ylim()[0] < 0.0
                    finite = ~np.isnan(ys)
                    pts = _points_px(ax, line)[finite, 1]
                    radius = line.get_markersize() * DPI / 72 / 2
                    assert (pts - ax.bbox.y0 >= radius).all(), ax.get_title()
    assert zeros >= len(IVS)  # the toy continuations have no doubt after their first sentence


def test_the_comparison_curve_draws_zero_inside_the_frame(run, toy_run_for, monkeypatch):
    drawn = []
    real_to_png = rfig.to_png
    monkeypatch.setattr(rfig, "to_png", lambda fig: drawn.append(fig) or real_to_png(fig))
    comp = compute_comparison(run, toy_run_for(ALL_RIGHT).path, ("half", "all right"))
    assert comparison_figure(comp, "toy") is not None
    (fig,) = drawn
    curve = fig.axes[1]  # majority vs timestep, pooled over interventions
    before, after = curve.get_lines()
    assert set(before.get_ydata()) == {0.0} and set(after.get_ydata()) == {1.0}
    _assert_inside_frame(curve, before)
    _assert_inside_frame(curve, after)


# -- text size at the width the page shows a figure -------------------------------------------------------------


def _smallest_text_px(fig, png_width: int) -> float:
    """Height in CSS px of the smallest visible text of ``fig`` when its PNG is shown at most `EMBED_WIDTH_PX`
    wide (the page scales wider images down, text included)."""
    fig.canvas.draw()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    scale = min(1.0, EMBED_WIDTH_PX / png_width)
    return min(t.get_fontsize() for t in texts) * DPI / 72 * scale


def _png_width(png: bytes) -> int:
    return Image.open(io.BytesIO(png)).size[0]


def test_the_page_shows_figures_at_the_width_they_are_checked_for(page):
    assert re.search(rf"main\{{max-width:{EMBED_WIDTH_PX}px;", page)
    assert "figure img{max-width:100%;" in page


def test_the_levels_grid_is_readable_at_the_embedded_width(run, data):
    """Seven interventions in one row made a 16-inch PNG shown at 1180 px: tick labels of about 8 px."""
    png = (run / "report" / "figures" / "levels_toy.png").read_bytes()
    fig = draw_levels(data, "toy")
    assert _png_width(png) == _png_width(to_png(fig)) == round(fig.get_figwidth() * DPI)
    assert _smallest_text_px(fig, _png_width(png)) >= MIN_TEXT_PX
    # the interventions wrap into rows of at most four panels, each with all three levels below its title
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == list(IVS)
    per_row: dict[float, int] = {}
    for ax in fig.axes:
        if ax.axison:
            y = round(ax.get_position().y0, 6)
            per_row[y] = per_row.get(y, 0) + 1
    assert len(per_row) == 3 * 2 and max(per_row.values()) == rfig.MAX_COLS


def test_every_redrawn_figure_keeps_its_text_readable(data, doubt):
    figs = {
        "majority_toy": draw_majority(data, "toy"),
        "levels_toy": draw_levels(data, "toy"),
        **draw_doubt_figures(doubt),
        "probes": draw_probe_figure([("tiny-reasoner", _probe_rows(data))]),
    }
    for name, fig in figs.items():
        assert _smallest_text_px(fig, _png_width(to_png(fig))) >= MIN_TEXT_PX, name


# -- legends inside the figure ------------------------------------------------------------------------------------


def _probe_rows(data: ReportData) -> list[dict]:
    """Stored-probe-shaped accuracy rows for the run's interventions (layers 0–3), as `probes_section` reads."""
    rows = []
    for k, iv in enumerate(data.interventions("toy")):
        for layer in range(4):
            accuracy = 0.5 if layer == 0 else min(1.0, 0.55 + 0.06 * k + 0.1 * layer)
            rows.append(
                {
                    "model": "tiny-reasoner",
                    "intervention": iv,
                    "category": data.category(iv),
                    "layer": layer,
                    "accuracy": accuracy,
                }
            )
    return rows


def _assert_legend_inside(fig) -> None:
    (legend,) = fig.legends
    box = legend.get_window_extent(fig.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and 0 <= box.y0 and box.y1 <= fig.bbox.y1, (box, fig.bbox)
    for ax in fig.axes:
        if ax.axison:
            assert box.y1 <= ax.get_tightbbox().y0 + 1  # below the panels and their axis labels, not over them


def test_the_probe_legend_lies_inside_the_figure(data):
    """Four legend columns of intervention names under one 4.2-inch panel ran past both edges of the PNG."""
    fig = draw_probe_figure([("tiny-reasoner", _probe_rows(data))])
    to_png(fig)
    _assert_legend_inside(fig)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == sorted(IVS)


def test_a_long_model_legend_lies_inside_a_one_panel_figure(make_row):
    models = [f"deepseek-ai/DeepSeek-R1-Distill-Qwen-{size}B" for size in (1.5, 7, 14, 32, 70)]
    data = ReportData.from_dicts([make_row(m, "math", "wikipedia_text", t) for m in models for t in (0.1, 0.5)])
    for fig in (draw_majority(data, "math"), draw_levels(data, "math")):
        to_png(fig)
        _assert_legend_inside(fig)
        assert [t.get_text() for t in fig.legends[0].get_texts()] == data.models("math")
    assert sorted(data.models("math")) == sorted(models)


# -- category colours -------------------------------------------------------------------------------------------


def test_doubt_figures_take_the_category_colours(data, doubt):
    figs = draw_doubt_figures(doubt)
    by_intervention = figs["doubt_after_intervention"].axes[0]
    labels = {f"{iv} ({data.category(iv)})": iv for iv in IVS}
    lines = [line for line in by_intervention.get_lines() if line.get_label() in labels]
    assert sorted(line.get_label() for line in lines) == sorted(labels)
    styles = set()
    for line in lines:
        iv = labels[line.get_label()]
        assert line.get_color() == category_color(data.category(iv)), iv
        styles.add((line.get_color(), line.get_marker(), str(line.get_linestyle())))
    assert len(styles) == len(IVS)  # same-category lines still differ by marker and dash
    recovered = figs["doubt_recovered"]
    for ax in recovered.axes[: len(IVS)]:
        color = category_color(data.category(ax.get_title()))
        assert ax.title.get_color() == color
        curves = [line for line in ax.get_lines() if line.get_label() in ("recovered", "not recovered")]
        assert len(curves) == 2 and {line.get_color() for line in curves} == {color}


def test_probe_lines_take_the_category_colours(data):
    fig = draw_probe_figure([("tiny-reasoner", _probe_rows(data))])
    lines = {line.get_label(): line for line in fig.axes[0].get_lines() if line.get_label() in IVS}
    assert sorted(lines) == sorted(IVS)
    for iv, line in lines.items():
        assert line.get_color() == category_color(data.category(iv)), iv


# -- tables ---------------------------------------------------------------------------------------------------------


def test_every_table_scrolls_sideways_instead_of_being_cut(page):
    css = re.search(r"\.table-wrap\{([^}]*)\}", page).group(1)
    assert "overflow-x:auto" in css
    tables = [m.start() for m in re.finditer(r"<table[ >]", page)]
    assert len(tables) > 5
    for start in tables:
        assert page[:start].endswith('<div class="table-wrap">'), page[start - 80 : start + 40]
    assert page.count('<div class="table-wrap">') == len(tables)
    # the stored section's Markdown table is one of them, all its columns in the page
    wide = page.index("A stored wide table")
    assert all(column in page[wide:] for column in WIDE_COLUMNS)
