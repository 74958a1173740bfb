"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes.

Deterministic by construction: no pyplot global state (each figure is a bare `matplotlib.figure.Figure` on
its own Agg canvas),
fixed rc settings inside an ``rc_context``, no timestamp or software tag in the PNG, so the same data
always yields the same bytes. Interventions are coloured by category as in the paper's Table 3 (benign
green, neutral blue, adversarial red); models get a qualitative palette.

Sized for the page that shows them: grids wrap at `MAX_COLS` panels so no text falls under about 9 px at the
HTML report's content width (`EMBED_WIDTH_PX`), y-limits are padded (`padded_ylim`) so values of 0 and 1 are
not hidden under the frame, and legends take only as many columns as fit the figure (`fit_legend`).
"""

from __future__ import annotations

import io
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from matplotlib import colormaps, rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D

import recovery.report.fmt as fmt
from recovery.report.data import LEVELS, Figure, ReportData, length_measure_text, pooled

CATEGORY_COLORS: dict[str, str] = {
    "benign": "#4d9a2a",  # the paper's YellowGreen, darkened for contrast on white
    "neutral": "#3566c8",  # CornflowerBlue, darkened
    "adversarial": "#d0453f",  # Salmon, darkened
    "other": "#6f6f6f",
}
LEVEL_TITLES = {"at_least_once": "at least once", "majority": "majority", "all": "all"}
DPI = 110
#: Widest a figure is shown in the HTML report (the page's content column, `recovery.report.html`); a
#: wider PNG is scaled down there, and its text with it.
EMBED_WIDTH_PX = 1180
#: Panels per row in the grids: at the report's fonts a row of four still fits `EMBED_WIDTH_PX` with its
#: smallest text (8 pt ticks) at about 12 px on screen; seven in a row shrank it to about 8 px.
MAX_COLS = 4
#: Share of the y-range left free below the lowest and above the highest tick, so a value of exactly 0 or
#: 1 is drawn inside the frame instead of under the (thicker, category-coloured) spine.
Y_PAD = 0.04
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_DASHES = ("-", "-.", ":", (0, (5, 1.5)))
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
def figure_style() -> Iterator[None]:
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
    """The report's colour of an intervention category (unknown categories are grey)."""
    return CATEGORY_COLORS.get(category, CATEGORY_COLORS["other"])


def intervention_styles(interventions: Sequence[str], category_of: Callable[[str], str]) -> dict[str, dict]:
    """``plot`` keyword arguments per intervention for figures with one line per intervention.

    The colour is the category's, as in every other figure and table of the report; interventions of the same
    category differ by marker and dash pattern (by their rank inside the category), so their lines stay apart.
    """
    rank: Counter[str] = Counter()
    styles = {}
    for iv in interventions:
        category = category_of(iv)
        k = rank[category]
        rank[category] += 1
        styles[iv] = {
            "color": category_color(category),
            "marker": _MARKERS[k % len(_MARKERS)],
            "linestyle": _DASHES[k % len(_DASHES)],
        }
    return styles


def padded_ylim(low: float, high: float) -> tuple[float, float]:
    """``(low, high)`` widened by `Y_PAD` of the range on both sides (values on the limits stay visible)."""
    pad = Y_PAD * (high - low)
    return low - pad, high + pad


def fit_legend(fig: MplFigure, handles, labels: Sequence[str], max_cols: int = 4, **kwargs):
    """A legend below the axes (``fig`` uses constrained layout) with as many columns as fit its width.

    A fixed column count let long names (intervention names in a one-panel figure, Hub model ids) run past the
    figure's edge, where the PNG cut them off; here the columns drop until the legend is no wider than the
    figure (one column is the minimum).
    """
    renderer = fig.canvas.get_renderer()
    legend = None
    for ncols in range(max(1, min(max_cols, len(labels))), 0, -1):
        if legend is not None:
            legend.remove()
        legend = fig.legend(handles, list(labels), loc="outside lower center", ncols=ncols, frameon=False, **kwargs)
        if legend.get_window_extent(renderer).width <= fig.bbox.width:
            break
    return legend


def decorate_panel(ax, title: str, category: str) -> None:
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


def robustness_ylim(values: Sequence[float]) -> tuple[float, float]:
    """Shared y-limits of the robustness panels: zoomed from below (`_lower_ylim`) up to 1, padded so that a
    robustness of exactly 0 (or 1) is drawn inside the frame rather than hidden under its bottom (top) line."""
    return padded_ylim(_lower_ylim(values), 1.0)


def grid_shape(n: int, max_cols: int) -> tuple[int, int]:
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
    ylim = robustness_ylim(values)
    for ax in axes:
        ax.set_xlim(ts[0] - pad, ts[-1] + pad)
        ax.set_ylim(*ylim)
        ax.set_autoscale_on(False)


def _model_legend(fig: MplFigure, colors: dict) -> None:
    handles = [Line2D([], [], color=c, marker="o", markersize=3, linewidth=1.4) for c in colors.values()]
    fit_legend(fig, handles, list(colors))


def draw_majority(data: ReportData, domain: str) -> MplFigure | None:
    """The matplotlib figure behind ``robustness_figure("majority", ...)`` (None without interventions)."""
    ivs, models = data.interventions(domain), data.models(domain)
    if not ivs:
        return None
    with figure_style():
        nrows, ncols = grid_shape(len(ivs), MAX_COLS)
        fig = new_figure(
            figsize=(2.6 * ncols + 0.4, 2.2 * nrows + 0.6 + 0.2 * math.ceil(len(models) / 4)), layout="constrained"
        )
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
        colors = model_colors(models)
        _fix_limits(axes, data, domain, ["majority"])
        for ax, iv in zip(axes, ivs):
            _plot_models(ax, data, domain, iv, "majority", colors)
            decorate_panel(ax, iv, data.category(iv))
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
    return fig


def draw_levels(data: ReportData, domain: str) -> MplFigure | None:
    """The matplotlib figure behind ``robustness_figure("levels", ...)`` (None without interventions).

    At most `MAX_COLS` interventions side by side: more are wrapped into further blocks of three level rows
    (the paper's seven interventions become a block of four and one of three), so the figure keeps the width
    of the majority grid and its text stays readable in the report instead of one row of seven shrunk panels.
    """
    ivs, models = data.interventions(domain), data.models(domain)
    if not ivs:
        return None
    with figure_style():
        nblocks, ncols = grid_shape(len(ivs), MAX_COLS)
        nrows = nblocks * len(LEVELS)
        fig = new_figure(
            figsize=(2.6 * ncols + 0.6, 1.9 * nrows + 0.3 * nblocks + 0.6 + 0.2 * math.ceil(len(models) / 4)),
            layout="constrained",
        )
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        colors = model_colors(models)
        _fix_limits(axes.ravel(), data, domain, LEVELS)
        for k, iv in enumerate(ivs):
            block, ci = divmod(k, ncols)
            for li, level in enumerate(LEVELS):
                ax = axes[block * len(LEVELS) + li, ci]
                _plot_models(ax, data, domain, iv, level, colors)
                decorate_panel(ax, iv if li == 0 else "", data.category(iv))
                if ci == 0:
                    ax.set_ylabel(f"{LEVEL_TITLES[level]}\nrobustness")
                if li == len(LEVELS) - 1:
                    ax.set_xlabel("timestep t")
                    ax.tick_params(labelbottom=True)  # sharex hides them on all but the grid's last row
        for k in range(len(ivs), nblocks * ncols):
            block, ci = divmod(k, ncols)
            for li in range(len(LEVELS)):
                axes[block * len(LEVELS) + li, ci].set_axis_off()
        fig.suptitle(f"Robustness levels vs timestep — {domain}", fontsize=10)
        _model_legend(fig, colors)
    return fig


# The robustness figures by kind: what draws one, and its caption (``{domain}`` filled in).
_ROBUSTNESS_FIGURES: dict[str, tuple[Callable[[ReportData, str], MplFigure | None], str]] = {
    "majority": (
        draw_majority,
        "Majority robustness (≥⌊N/2⌋+1 of N continuations correct) per intervention on {domain}; "
        "one line per model, shaded band = 95 % Wilson interval. Panel colour = category "
        "(green benign, blue neutral, red adversarial).",
    ),
    "levels": (
        draw_levels,
        "At-least-once (K ≥ 1), majority and all (K = N) robustness per intervention on {domain}; "
        "one line per model with its 95 % Wilson interval band.",
    ),
}


def robustness_figure(kind: str, data: ReportData, domain: str) -> Figure | None:
    """The report's robustness figure ``<kind>_<domain>`` (None without interventions): ``"majority"``,
    majority robustness vs timestep, one panel per intervention and one line (with CI band) per model
    (Fig. 2); ``"levels"``, all three levels, rows = level, columns = intervention (Figs. 6–11)."""
    draw, caption = _ROBUSTNESS_FIGURES[kind]
    with figure_style():  # the PNG written under the rc settings the figure was drawn with
        fig = draw(data, domain)
        if fig is None:
            return None
        png = to_png(fig)
    return Figure(name=f"{kind}_{domain}", png_bytes=png, caption=caption.format(domain=domain))


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
    with figure_style():
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
        caption=f"Percentage change in CoT length on {domain} ("
        + length_measure_text(data.length, "whole CoT without the inserted text vs the original")
        + "; red = longer). Left like Table 6, right like Table 5. Grey = no data.",
    )
