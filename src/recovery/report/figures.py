"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes.

Deterministic by construction: no pyplot global state (each figure is a bare `matplotlib.figure.Figure` on
its own Agg canvas),
fixed rc settings inside an ``rc_context``, no timestamp or software tag in the PNG, so the same data
always yields the same bytes. Interventions are coloured by category as in the paper's Table 3 (benign
green, neutral blue, adversarial red); models get a qualitative palette.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from matplotlib import colormaps, rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D

from recovery.report import fmt
from recovery.report.data import LEVELS, Figure, ReportData, pooled

CATEGORY_COLORS: dict[str, str] = {
    "benign": "#4d9a2a",  # the paper's YellowGreen, darkened for contrast on white
    "neutral": "#3566c8",  # CornflowerBlue, darkened
    "adversarial": "#d0453f",  # Salmon, darkened
    "other": "#6f6f6f",
}
LEVEL_TITLES = {"at_least_once": "at least once", "majority": "majority", "all": "all"}
DPI = 110
_RC = {
    "font.family": "DejaVu Sans",  # ships with matplotlib, so the rendering does not depend on the host
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 8,
    "svg.hashsalt": "recovery-report",
    "path.simplify": True,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@contextmanager
def _style() -> Iterator[None]:
    with rc_context(_RC):
        yield


def new_figure(**kwargs) -> MplFigure:
    """A figure on its own Agg canvas: no pyplot, no global backend switch, safe in threads and notebooks."""
    fig = MplFigure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def to_png(fig: MplFigure) -> bytes:
    """PNG bytes of ``fig`` with no software/date metadata (so identical input gives identical bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, facecolor="white")
    return buf.getvalue()


def model_colors(models: Sequence[str]) -> dict[str, tuple]:
    """A stable colour per model: tab10 up to ten models, tab20 beyond."""
    cmap = colormaps["tab10" if len(models) <= 10 else "tab20"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(models)}


def category_color(category: str) -> str:
    return CATEGORY_COLORS.get(category, CATEGORY_COLORS["other"])


def _decorate_panel(ax, title: str, category: str) -> None:
    # The category shows in the title colour and the frame, as the paper colours intervention names.
    color = category_color(category)
    ax.set_title(title, color=color, fontweight="bold")
    for spine in ax.spines.values():
        spine.set_edgecolor(color)
        spine.set_linewidth(1.2)
    ax.grid(True, color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)


def _lower_ylim(values: Sequence[float]) -> float:
    # Robustness is often near 1; a zoomed but shared axis (in steps of 0.1, at most 0.9) keeps differences
    # visible while panels stay comparable.
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return 0.0
    return max(0.0, min(0.9, math.floor((min(finite) - 0.05) * 10) / 10))


def _grid(n: int, max_cols: int) -> tuple[int, int]:
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


def _curve(data: ReportData, model: str, domain: str, iv: str, level: str, ts: Sequence[float]):
    rows = [data.row(model, domain, iv, t) for t in ts]
    return tuple(
        [r[f"{level}_{stat}"] if r is not None else math.nan for r in rows] for stat in ("mean", "ci_low", "ci_high")
    )


def _plot_models(ax, data: ReportData, domain: str, iv: str, level: str, colors: dict) -> None:
    ts = data.timesteps(domain)
    alpha = 0.15 if len(colors) <= 4 else 0.07  # many overlapping bands would hide the lines
    for model, color in colors.items():
        mean, low, high = _curve(data, model, domain, iv, level, ts)
        if all(math.isnan(v) for v in mean):
            continue
        ax.fill_between(ts, low, high, color=color, alpha=alpha, linewidth=0)
        ax.plot(ts, mean, color=color, marker="o", markersize=3, linewidth=1.4)
    ax.set_xticks(ts, [fmt.timestep(t) for t in ts])


def _fix_limits(axes, data: ReportData, domain: str, levels: Sequence[str]) -> None:
    """Set the shared limits before drawing and switch autoscaling off.

    With dozens of shared panels, matplotlib's autoscaling after every ``fill_between`` dominated the run
    time (seconds per figure at the paper's scale); the limits are known from the data anyway.
    """
    values = [r[f"{lv}_{stat}"] for r in data.select(domain=domain) for lv in levels for stat in ("mean", "ci_low")]
    ts = data.timesteps(domain)
    pad = 0.05 * (ts[-1] - ts[0]) if len(ts) > 1 else 0.1
    for ax in axes:
        ax.set_xlim(ts[0] - pad, ts[-1] + pad)
        ax.set_ylim(_lower_ylim(values), 1.02)
        ax.set_autoscale_on(False)


def _model_legend(fig: MplFigure, colors: dict) -> None:
    handles = [Line2D([], [], color=c, marker="o", markersize=3, linewidth=1.4) for c in colors.values()]
    fig.legend(handles, list(colors), loc="outside lower center", ncols=min(len(colors), 4), frameon=False)


def majority_figure(data: ReportData, domain: str) -> Figure | None:
    """Majority robustness vs timestep: one panel per intervention, one line (with CI band) per model (Fig. 2)."""
    ivs, models = data.interventions(domain), data.models(domain)
    if not ivs:
        return None
    with _style():
        nrows, ncols = _grid(len(ivs), 4)
        fig = new_figure(
            figsize=(2.6 * ncols + 0.4, 2.2 * nrows + 0.6 + 0.2 * math.ceil(len(models) / 4)), layout="constrained"
        )
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
        colors = model_colors(models)
        _fix_limits(axes, data, domain, ["majority"])
        for ax, iv in zip(axes, ivs):
            _plot_models(ax, data, domain, iv, "majority", colors)
            _decorate_panel(ax, iv, data.category(iv))
        for ax in axes[len(ivs) :]:
            ax.set_axis_off()
        for i, ax in enumerate(axes[: len(ivs)]):
            if i % ncols == 0:
                ax.set_ylabel("majority robustness")
            if i >= len(ivs) - ncols:
                ax.set_xlabel("timestep t")
                ax.tick_params(labelbottom=True)
        fig.suptitle(f"Majority robustness vs timestep — {domain}", fontsize=10)
        _model_legend(fig, colors)
        png = to_png(fig)
    return Figure(
        name=f"majority_{domain}",
        png_bytes=png,
        caption=f"Majority robustness (≥⌊N/2⌋+1 of N continuations correct) per intervention on {domain}; "
        "one line per model, shaded band = 95 % Wilson interval. Panel colour = category "
        "(green benign, blue neutral, red adversarial).",
    )


def levels_figure(data: ReportData, domain: str) -> Figure | None:
    """All three robustness levels vs timestep: rows = level, columns = intervention, lines = models (Figs. 6–11)."""
    ivs, models = data.interventions(domain), data.models(domain)
    if not ivs:
        return None
    with _style():
        ncols = len(ivs)
        fig = new_figure(
            figsize=(2.2 * ncols + 0.6, 2.0 * len(LEVELS) + 0.8 + 0.2 * math.ceil(len(models) / 4)),
            layout="constrained",
        )
        axes = fig.subplots(len(LEVELS), ncols, sharex=True, sharey=True, squeeze=False)
        colors = model_colors(models)
        _fix_limits(axes.ravel(), data, domain, LEVELS)
        for li, level in enumerate(LEVELS):
            for ci, iv in enumerate(ivs):
                ax = axes[li, ci]
                _plot_models(ax, data, domain, iv, level, colors)
                _decorate_panel(ax, iv if li == 0 else "", data.category(iv))
                if ci == 0:
                    ax.set_ylabel(f"{LEVEL_TITLES[level]}\nrobustness")
                if li == len(LEVELS) - 1:
                    ax.set_xlabel("timestep t")
        fig.suptitle(f"Robustness levels vs timestep — {domain}", fontsize=10)
        _model_legend(fig, colors)
        png = to_png(fig)
    return Figure(
        name=f"levels_{domain}",
        png_bytes=png,
        caption=f"At-least-once (K ≥ 1), majority and all (K = N) robustness per intervention on {domain}; "
        "one line per model with its 95 % Wilson interval band.",
    )


def length_figure(data: ReportData, domain: str) -> Figure | None:
    """CoT length change heatmaps: intervention × timestep (Table 6) and intervention × model (Table 5)."""
    ivs, models, ts = data.interventions(domain), data.models(domain), data.timesteps(domain)
    by_t = [
        [pooled(data.select(domain=domain, intervention=iv, target_t=t), "whole_pct_mean") for t in ts] for iv in ivs
    ]
    by_m = [
        [pooled(data.select(domain=domain, intervention=iv, model=m), "whole_pct_mean") for m in models] for iv in ivs
    ]
    finite = [abs(v) for row in by_t + by_m for v in row if not math.isnan(v)]
    if not finite:
        return None  # lengths were not measured; the section says so instead
    vmax = max(max(finite), 1.0)
    norm = Normalize(-vmax, vmax)  # symmetric so 0 % is white: red longer, blue shorter
    cmap = colormaps["RdBu_r"].with_extremes(bad="#dddddd")
    with _style():
        width = 1.6 + 0.55 * (len(ts) + len(models)) + 1.2
        fig = new_figure(figsize=(max(width, 6.0), 0.42 * len(ivs) + 1.9), layout="constrained")
        axes = fig.subplots(1, 2, width_ratios=[max(len(ts), 1), max(len(models), 1)], squeeze=False)[0]
        for ax, grid, labels, xlabel in (
            (axes[0], by_t, [fmt.timestep(t) for t in ts], "timestep t (pooled over models)"),
            (axes[1], by_m, models, "model (pooled over timesteps)"),
        ):
            image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
            ax.set_xticks(
                range(len(labels)),
                labels,
                rotation=0 if ax is axes[0] else 30,
                ha="center" if ax is axes[0] else "right",
            )
            ax.set_yticks(range(len(ivs)), ivs if ax is axes[0] else [""] * len(ivs))
            ax.set_xlabel(xlabel)
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if not math.isnan(v):
                        ax.text(
                            j,
                            i,
                            f"{v:+.0f}",
                            ha="center",
                            va="center",
                            fontsize=7,
                            color="white" if abs(v) > 0.6 * vmax else "black",
                        )
        for label, iv in zip(axes[0].get_yticklabels(), ivs):
            label.set_color(category_color(data.category(iv)))
            label.set_fontweight("bold")
        fig.colorbar(image, ax=list(axes), label="CoT length change (%)", shrink=0.9)
        fig.suptitle(f"CoT length change after intervention — {domain}", fontsize=10)
        png = to_png(fig)
    return Figure(
        name=f"length_{domain}",
        png_bytes=png,
        caption=f"Percentage change in CoT length on {domain} (whole CoT without the inserted text vs the "
        "original; red = longer). Left like Table 6, right like Table 5. Grey = no data.",
    )
