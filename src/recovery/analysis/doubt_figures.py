"""The figures of the doubt section: Fig. 5-style curves of the doubt rate per sentence after the
intervention, split by recovered vs not, against the clean baseline.

Drawn from a `recovery.analysis.doubt_result.DoubtResult` alone, in the report's style
(`recovery.report.figures`): deterministic PNG bytes for the same numbers.
"""

from __future__ import annotations

import math

from recovery.analysis.doubt_result import DoubtResult, rate
from recovery.report.data import Figure
from recovery.report.figures import (
    MAX_COLS,
    category_color,
    decorate_panel,
    figure_style,
    grid_shape,
    intervention_styles,
    model_colors,
    new_figure,
    padded_ylim,
    to_png,
)

__all__ = ["doubt_figures", "draw_doubt_figures"]


def rates_by_index(curve: list[tuple[int, int]]) -> list[float]:
    """The doubt rate at each sentence index of a curve of ``(sentences, doubtful)`` pairs."""
    return [rate([p]) for p in curve]


def _baseline_line(ax, value: float) -> None:
    if not math.isnan(value):
        ax.axhline(value, color="black", linestyle="--", linewidth=1.0, label=f"baseline {value:.3f}")


def _axes_style(ax, n: int, title: str | None) -> None:
    if title is not None:
        ax.set_title(title)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_xticks(range(1, n + 1, max(1, n // 10)))
    ax.set_xlabel("sentence after the intervention")
    ax.grid(True, color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)


def _ylim(axes, values: list[float]) -> None:
    # Padded below 0 (a rate of 0, common after the first sentences, is drawn inside the frame, not on it).
    finite = [v for v in values if not math.isnan(v)]
    top = min(1.0, max(finite, default=0.0) * 1.1 + 0.02)
    for ax in axes:
        ax.set_ylim(*padded_ylim(0.0, max(top, 0.05)))


def _draw_main(result: DoubtResult):
    """By intervention (coloured by category, as everywhere in the report) and by model."""
    n, xs = result.sentences, list(range(1, result.sentences + 1))
    base = result.baseline_rate()
    ivs, models = result.interventions(), result.models()
    with figure_style():
        fig = new_figure(figsize=(9.0, 3.4), layout="constrained")
        left, right = fig.subplots(1, 2, sharey=True)
        values = [base]
        styles = intervention_styles(ivs, result.category)
        for iv in ivs:
            ys = rates_by_index(result.curve(intervention=iv))
            values += ys
            left.plot(xs, ys, markersize=2.5, linewidth=1.3, label=f"{iv} ({result.category(iv)})", **styles[iv])
        mcolors = model_colors(models)
        for m in models:
            ys = rates_by_index(result.curve(model=m))
            values += ys
            right.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.3, color=mcolors[m], label=m)
        for ax, title in ((left, "by intervention"), (right, "by model")):
            _baseline_line(ax, base)
            _axes_style(ax, n, title)
            ax.legend(loc="upper right", frameon=False, fontsize=6.5)
        left.set_ylabel(f"doubt rate ({result.detector})")
        _ylim((left, right), values)
        fig.suptitle("Doubtfulness in the sentences after the intervention", fontsize=10)
    return fig


def _main_figure(result: DoubtResult) -> Figure:
    with figure_style():
        png = to_png(_draw_main(result))
    n = result.sentences
    return Figure(
        "doubt_after_intervention",
        png,
        f"Share of doubtful sentences at each of the first {n} sentences after the intervention "
        f"({result.detector} detector), pooled over models (left) and over interventions (right). "
        "Dashed: the baseline from random windows of the unperturbed traces (paper Fig. 5).",
    )


def _draw_recovered(result: DoubtResult):
    """One panel per intervention, framed and titled in its category's colour like the robustness panels."""
    n, xs = result.sentences, list(range(1, result.sentences + 1))
    base = result.baseline_rate()
    ivs = result.interventions()
    with figure_style():
        nrows, ncols = grid_shape(len(ivs), MAX_COLS)
        fig = new_figure(figsize=(2.5 * ncols + 0.4, 2.2 * nrows + 0.7), layout="constrained")
        axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
        values = [base]
        for ax, iv in zip(axes, ivs):
            for recovered, style, label in ((True, "-", "recovered"), (False, ":", "not recovered")):
                ys = rates_by_index(result.curve(intervention=iv, recovered=recovered))
                values += ys
                ax.plot(
                    xs,
                    ys,
                    linestyle=style,
                    marker="o",
                    markersize=2,
                    linewidth=1.3,
                    color=category_color(result.category(iv)),
                    label=label,
                )
            _baseline_line(ax, base)
            decorate_panel(ax, iv, result.category(iv))
            _axes_style(ax, n, None)
        for ax in axes[len(ivs) :]:
            ax.set_axis_off()
        axes[0].legend(loc="upper right", frameon=False, fontsize=6.5)
        axes[0].set_ylabel(f"doubt rate ({result.detector})")
        _ylim(axes[: len(ivs)], values)
        fig.suptitle("Doubt after the intervention: recovered (correct) vs not", fontsize=10)
    return fig


def _recovered_figure(result: DoubtResult) -> Figure:
    with figure_style():
        png = to_png(_draw_recovered(result))
    return Figure(
        "doubt_recovered",
        png,
        "Doubt rate per sentence index for continuations graded correct (solid) and not (dotted), "
        "per intervention; dashed: baseline.",
    )


def _draw_baseline(result: DoubtResult):
    n, xs = result.sentences, list(range(1, result.sentences + 1))
    with figure_style():
        fig = new_figure(figsize=(4.8, 3.0), layout="constrained")
        ax = fig.subplots()
        mcolors = model_colors(result.models())
        values = [result.baseline_rate()]
        for m in result.models():
            ys = [rate([tuple(result.baseline.get((m, i), (0, 0)))]) for i in xs]
            values += ys
            ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.2, color=mcolors[m], label=m)
        _baseline_line(ax, result.baseline_rate())
        _axes_style(ax, n, "baseline windows")
        ax.set_xlabel("position in the random window")
        ax.set_ylabel(f"doubt rate ({result.detector})")
        ax.legend(loc="upper right", frameon=False, fontsize=6.5)
        _ylim([ax], values)
    return fig


def _baseline_figure(result: DoubtResult) -> Figure:
    n = result.sentences
    with figure_style():
        png = to_png(_draw_baseline(result))
    return Figure(
        "doubt_baseline",
        png,
        f"Doubt rate by position inside random {n}-sentence windows of the unperturbed traces "
        "(no intervention, so no position is special); dashed: pooled baseline.",
    )


def draw_doubt_figures(result: DoubtResult) -> dict:
    """The matplotlib figures behind `doubt_figures`, by figure name (for checks of what is drawn)."""
    if result.cells:
        return {"doubt_after_intervention": _draw_main(result), "doubt_recovered": _draw_recovered(result)}
    if result.baseline:
        return {"doubt_baseline": _draw_baseline(result)}
    return {}


def doubt_figures(result: DoubtResult) -> list[Figure]:
    """Fig. 5-style curves (and the recovered split) when there are continuations, else the baseline."""
    if result.cells:
        return [_main_figure(result), _recovered_figure(result)]
    if result.baseline:
        return [_baseline_figure(result)]
    return []


# -- tables ----------------------------------------------------------------------------------------------------
