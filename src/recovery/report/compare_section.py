"""The comparison as a report `Section`: summary, one figure per domain, the tables of changes with their
paired intervals, and what only one run measured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from matplotlib.patches import Patch

import recovery.report.figures as figures
import recovery.report.fmt as fmt
from recovery.report.comparison import Comparison
from recovery.report.data import Figure, Section, Table
from recovery.report.tables import metadata_table

#: The header of each key column a table of changes may lead with.
KEY_HEADERS: dict[str, str] = {
    "domain": "Domain",
    "intervention": "Intervention",
    "category": "Category",
    "target_t": "t",
    "n": "N",
}


def comparison_section(comp: Comparison) -> Section:
    """Summary, one figure per domain, then the tables."""
    a, b = comp.labels
    ci = f"{round(100 * comp.confidence)} % CI"
    figs = [f for f in (comparison_figure(comp, o["domain"]) for o in comp.overall) if f is not None]
    overall = [
        {"domain": o["domain"], **{k[len("majority_") :]: v for k, v in o.items() if k.startswith("majority_")}}
        for o in comp.overall
    ]
    by_intervention, by_timestep = change_tables(comp)
    tables = [
        _changes(
            comp,
            "Majority robustness overall (matched chains of the shared cells)",
            overall,
            ("domain",),
            unpaired=True,
        ),
        by_intervention,
        _changes(comp, "Majority robustness by category", comp.by_category, ("domain", "category")),
        by_timestep,
        _changes(
            comp,
            "Majority robustness by cell",
            comp.by_cell,
            ("domain", "intervention", "category", "target_t", "n"),
            unpaired=True,
            collapsed=True,
        ),
        _clean_table("Clean accuracy (the compared runs' problems)", comp.clean, comp),
        *([_clean_table("Clean accuracy (separate clean set)", comp.clean_runs, comp)] if comp.clean_runs else []),
        _changes(
            comp,
            "Length overhead (% change in CoT length)",
            comp.length,
            ("domain", "intervention", "category"),
            pct=True,
        ),
    ]
    if comp.cells_left_out or comp.models_left_out:
        tables.append(_left_out_table(comp))
    note = (
        f"Before and after values are over the chains both runs measured; Δ is after − before in points with "
        f"a {ci} paired over those chains (Newcombe's interval for robustness and accuracy, a paired "
        "bootstrap for length). A row that pools several chains of one problem (overall, by intervention, "
        "category or timestep) takes the problem as the unit of sampling: Newcombe's interval at the "
        "effective number of pairs (the pairs divided by the design effect of the problems), a bootstrap that "
        "resamples problems for length; the *interval* column names which, and *problems* how many. A single "
        "cell holds one chain per problem. Clean accuracy per side is over all its problems, with a Wilson "
        "interval."
    )
    return Section(f"Comparison: {a} → {b}", f"{comp.summary}\n\n{note}", figures=figs, tables=tables)


def change_tables(comp: Comparison) -> tuple[Table, Table]:
    """The changes of majority robustness by intervention and by timestep, with their paired intervals."""
    return (
        _changes(
            comp,
            "Majority robustness by intervention",
            comp.by_intervention,
            ("domain", "intervention", "category"),
            unpaired=True,
        ),
        _changes(comp, "Majority robustness by timestep", comp.by_timestep, ("domain", "target_t")),
    )


def comparison_figure(comp: Comparison, domain: str) -> Figure | None:
    """Grouped bars of majority robustness per intervention (before light, after solid, coloured by
    category) beside the pooled majority-vs-timestep curves of both runs."""
    ivs = [r for r in comp.by_intervention if r["domain"] == domain]
    ts = [r for r in comp.by_timestep if r["domain"] == domain]
    if not ivs:
        return None
    a, b = comp.labels
    with figures.figure_style():
        fig = figures.new_figure(figsize=(max(6.5, 1.0 * len(ivs) + 3.5), 3.6), layout="constrained")
        ax_bar, ax_t = fig.subplots(1, 2, width_ratios=[max(len(ivs), 2), 2.2])
        x = list(range(len(ivs)))
        colors = [figures.category_color(r["category"]) for r in ivs]
        ax_bar.bar(
            [i - 0.2 for i in x],
            [_nan0(r["before"]) for r in ivs],
            0.4,
            color=colors,
            alpha=0.35,
            hatch="///",
            edgecolor=colors,
            label=a,
        )
        ax_bar.bar([i + 0.2 for i in x], [_nan0(r["after"]) for r in ivs], 0.4, color=colors, label=b)
        ax_bar.set_xticks(x, [r["intervention"] for r in ivs], rotation=30, ha="right")
        for label, r in zip(ax_bar.get_xticklabels(), ivs):
            label.set_color(figures.category_color(r["category"]))
        ax_bar.set_ylim(0, 1.05)
        ax_bar.set_ylabel("majority robustness")
        # Proxy patches in grey: the real bars change colour by category, the legend only shows the style.
        # Outside the axes so it never hides a bar.
        proxies = [Patch(facecolor="#bbbbbb", edgecolor="#777777", hatch="///", alpha=0.6), Patch(facecolor="#555555")]
        fig.legend(proxies, [a, b], loc="outside lower center", ncols=2, frameon=False)
        ax_bar.grid(True, axis="y", color="#e6e6e6", linewidth=0.6)
        ax_bar.set_axisbelow(True)
        tv = [r["target_t"] for r in ts]
        ax_t.plot(tv, [r["before"] for r in ts], color="#888888", linestyle="--", marker="o", markersize=3, label=a)
        ax_t.plot(tv, [r["after"] for r in ts], color="#222222", marker="o", markersize=3, label=b)
        ax_t.set_xticks(tv, [fmt.timestep(t) for t in tv])
        ax_t.set_ylim(*figures.padded_ylim(0.0, 1.0))  # a robustness of 0 or 1 drawn inside the frame
        ax_t.set_xlabel("timestep t")
        ax_t.set_title("pooled over interventions")
        ax_t.grid(True, color="#e6e6e6", linewidth=0.6)
        ax_t.legend(loc="best")
        fig.suptitle(f"Majority robustness, {a} vs {b} — {domain}", fontsize=10)
        png = figures.to_png(fig)
    return Figure(
        name=f"compare_{domain}",
        png_bytes=png,
        caption=f"Majority robustness on {domain} per intervention ({a} hatched, {b} solid; colour = category) "
        "and per timestep, over the chains both runs measured, pooled over the compared models.",
    )


def metadata_section(comp: Comparison) -> Section:
    """Both runs' metadata tables."""

    tabs = [
        replace(metadata_table(meta), title=f"Run metadata — {label}")
        for label, meta in zip(comp.labels, comp.meta)
        if meta
    ]
    return Section("Runs compared", "" if tabs else "_No run metadata was provided._", tables=tabs)


# ----------------------------------------------------------------------------------------------- helpers


def _key_cell(row: Mapping[str, Any], key: str) -> str:
    return fmt.timestep(row[key]) if key == "target_t" else str(row[key])


def _interval(row: Mapping[str, Any], prefix: str = "") -> str:
    low, high = row[f"{prefix}ci_low"], row[f"{prefix}ci_high"]
    if fmt.is_missing(low) or fmt.is_missing(high):
        return fmt.MISSING
    return f"[{fmt.signed(low)}, {fmt.signed(high)}]"


def _changes(
    comp: Comparison,
    title: str,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    *,
    pct: bool = False,
    unpaired: bool = False,
    collapsed: bool = False,
) -> Table:
    a, b = comp.labels
    value = fmt.signed if pct else fmt.num
    ci = f"{round(100 * comp.confidence)} % CI"
    cols = [
        *(KEY_HEADERS[k] for k in keys),
        a,
        b,
        "Δ points",
        ci,
        "interval",
        "paired chains",
        "problems",
        *([f"only {a}", f"only {b}"] if unpaired else []),
    ]
    body = [
        [
            *(_key_cell(r, k) for k in keys),
            value(r["before"]),
            value(r["after"]),
            fmt.signed(r["delta"]),
            _interval(r),
            r["interval"] or fmt.MISSING,
            str(r["pairs"]),
            str(r["problems"]),
            *([str(r["before_only"]), str(r["after_only"])] if unpaired else []),
        ]
        for r in rows
    ]
    align = "l" * len(keys) + "rrrrlrr" + "rr" * unpaired
    return Table(title, cols, body, align=align, collapsed=collapsed)


def _clean_table(title: str, rows: Sequence[Mapping[str, Any]], comp: Comparison) -> Table:
    a, b = comp.labels
    ci = f"{round(100 * comp.confidence)} % CI"
    cols = [
        "Domain",
        a,
        f"n ({a})",
        f"{ci} ({a})",
        b,
        f"n ({b})",
        f"{ci} ({b})",
        "Δ points",
        ci,
        "interval",
        "paired problems",
    ]
    body = [
        [
            r["domain"],
            fmt.num(r["before"]),
            str(r["n_before"]),
            fmt.interval(r["before_ci_low"], r["before_ci_high"]),
            fmt.num(r["after"]),
            str(r["n_after"]),
            fmt.interval(r["after_ci_low"], r["after_ci_high"]),
            fmt.signed(r["delta"]),
            _interval(r),
            r["interval"] or fmt.MISSING,
            str(r["pairs"]),
        ]
        for r in rows
    ]
    return Table(title, cols, body, align="l" + "r" * 8 + "lr")


def _left_out_table(comp: Comparison) -> Table:
    body = [
        [
            c["side"],
            c["model"],
            c["domain"],
            c["intervention"],
            fmt.timestep(c["target_t"]),
            str(c["n"]),
            str(c["chains"]),
        ]
        for c in comp.cells_left_out
    ]
    body += [
        [m["side"], m["model"], "–", "(model not compared)", "–", "–", str(m["chains"])] for m in comp.models_left_out
    ]
    cols = ["Only in", "Model", "Domain", "Intervention", "t", "N", "chains"]
    return Table("Left out: measured in one run only", cols, body, align="lllllrr")


def _nan0(v: float) -> float:
    return 0.0 if v != v else v
