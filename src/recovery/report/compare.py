"""Before/after comparison of two runs (``recovery compare RUN_A RUN_B``, the demo's training report).

What changed is measured on the pooled chains of each run: majority robustness per (domain, intervention),
per category and per timestep (in percentage points), clean accuracy (points) and the length overhead
(``whole_pct``, the paper's definition; change in percentage points). Models are pooled because a
before/after pair usually names the model differently (base vs fine-tuned checkpoint).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from matplotlib.patches import Patch

from recovery.report import figures, fmt
from recovery.report.data import CATEGORIES, Figure, ReportData, Section, Table, order_interventions, pooled
from recovery.report.render import ReportPaths, write_report


@dataclass(frozen=True)
class Comparison:
    """The measured changes. Robustness and accuracy are fractions; ``delta`` columns are points (×100).

    Every list holds plain dicts with ``before``, ``after`` and ``delta`` plus its keys; a side with no data
    is NaN and so is the delta.
    """

    labels: tuple[str, str]
    overall: tuple[dict[str, Any], ...]  # domain; majority_*, clean_*, length_* (before/after/delta)
    by_intervention: tuple[dict[str, Any], ...]  # domain, intervention, category, chains_before/after
    by_category: tuple[dict[str, Any], ...]  # domain, category
    by_timestep: tuple[dict[str, Any], ...]  # domain, target_t
    clean: tuple[dict[str, Any], ...]  # domain, n_before, n_after
    length: tuple[dict[str, Any], ...]  # domain, intervention, category (whole_pct in %, delta in points)
    summary: str


def compute_comparison(
    before: ReportData, after: ReportData, labels: Sequence[str] = ("before", "after")
) -> Comparison:
    """Compare two runs; see `Comparison`. Pooling weights each group by its number of chains."""
    a_label, b_label = labels

    def category(iv: str) -> str:
        # An intervention only one run knows (a user tag, say) takes that run's category.
        cat = after.category(iv)
        return cat if cat != "other" else before.category(iv)

    parts: dict[str, list[dict[str, Any]]] = {f: [] for f in _PARTS}
    domains = {*before.domains(), *after.domains(), *(c["domain"] for c in (*before.clean, *after.clean))}
    for domain in sorted(domains):
        for name, rows in _compare_domain(before, after, domain, category).items():
            parts[name] += rows
    comp = Comparison((a_label, b_label), **{k: tuple(v) for k, v in parts.items()}, summary="")
    return replace(comp, summary=summary_text(comp))


_PARTS = ("overall", "by_intervention", "by_category", "by_timestep", "clean", "length")


def _compare_domain(before: ReportData, after: ReportData, d: str, category) -> dict[str, list[dict[str, Any]]]:
    ivs = order_interventions({*before.interventions(d), *after.interventions(d)}, category)
    out: dict[str, list[dict[str, Any]]] = {f: [] for f in _PARTS}
    for iv in ivs:
        rb, ra = before.select(domain=d, intervention=iv), after.select(domain=d, intervention=iv)
        key = {"domain": d, "intervention": iv, "category": category(iv)}
        out["by_intervention"].append(
            {**key, **_pair(rb, ra, "majority_mean"), "chains_before": _chains(rb), "chains_after": _chains(ra)}
        )
        out["length"].append({**key, **_pair(rb, ra, "whole_pct_mean", 1)})
    for cat in CATEGORIES:
        members = {iv for iv in ivs if category(iv) == cat}
        if members:
            rb = [r for r in before.select(domain=d) if r["intervention"] in members]
            ra = [r for r in after.select(domain=d) if r["intervention"] in members]
            out["by_category"].append({"domain": d, "category": cat, **_pair(rb, ra, "majority_mean")})
    for t in sorted({*before.timesteps(d), *after.timesteps(d)}):
        rb, ra = before.select(domain=d, target_t=t), after.select(domain=d, target_t=t)
        out["by_timestep"].append({"domain": d, "target_t": t, **_pair(rb, ra, "majority_mean")})
    (cb, nb), (ca, na) = _clean(before, d), _clean(after, d)
    clean = {"before": cb, "after": ca, "delta": _delta(cb, ca)}
    out["clean"].append({"domain": d, **clean, "n_before": nb, "n_after": na})
    rb, ra = before.select(domain=d), after.select(domain=d)
    out["overall"].append(
        {
            "domain": d,
            **{f"majority_{k}": v for k, v in _pair(rb, ra, "majority_mean").items()},
            **{f"clean_{k}": v for k, v in clean.items()},
            **{f"length_{k}": v for k, v in _pair(rb, ra, "whole_pct_mean", 1).items()},
        }
    )
    return out


def summary_text(comp: Comparison) -> str:
    """A few Markdown bullet lines, one per domain: majority robustness, per category, clean accuracy, length."""
    a, b = comp.labels
    if not comp.overall:
        return f"_No data in either run ({a}, {b}): nothing to compare._"
    lines = [f"Changes from **{a}** to **{b}** (points = percentage points):", ""]
    for o in comp.overall:
        d = o["domain"]
        cats = "; ".join(f"{c['category']} {fmt.signed(c['delta'])}" for c in comp.by_category if c["domain"] == d)
        parts = [
            (
                f"majority robustness {fmt.num(o['majority_before'])} → {fmt.num(o['majority_after'])} "
                f"({fmt.signed(o['majority_delta'])} points{'; ' + cats if cats else ''})"
            )
        ]
        # A measure neither run has (e.g. no clean accuracy) is left out rather than printed as dashes.
        if not (fmt.is_missing(o["clean_before"]) and fmt.is_missing(o["clean_after"])):
            parts.append(
                f"clean accuracy {fmt.num(o['clean_before'])} → {fmt.num(o['clean_after'])} "
                f"({fmt.signed(o['clean_delta'])} points)"
            )
        if not (fmt.is_missing(o["length_before"]) and fmt.is_missing(o["length_after"])):
            parts.append(
                f"length overhead {fmt.signed(o['length_before'])} % → {fmt.signed(o['length_after'])} % "
                f"({fmt.signed(o['length_delta'])} points)"
            )
        lines.append(f"- **{d}**: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def comparison_section(
    comp: Comparison, *, before: ReportData | None = None, after: ReportData | None = None
) -> Section:
    """The comparison as one `Section`: summary, one figure per domain, then the tables."""
    a, b = comp.labels
    figs = []
    for o in comp.overall:
        fig = comparison_figure(comp, o["domain"])
        if fig is not None:
            figs.append(fig)
    tables = [
        _table(
            "Overall (pooled over models, interventions and timesteps)",
            ["Domain"],
            comp.overall,
            a,
            b,
            prefix="majority_",
            keys=("domain",),
        ),
        _table(
            "Majority robustness by intervention",
            ["Domain", "Intervention", "Category"],
            comp.by_intervention,
            a,
            b,
            keys=("domain", "intervention", "category"),
            extra=("chains_before", "chains_after"),
        ),
        _table(
            "Majority robustness by category",
            ["Domain", "Category"],
            comp.by_category,
            a,
            b,
            keys=("domain", "category"),
        ),
        _table("Majority robustness by timestep", ["Domain", "t"], comp.by_timestep, a, b, keys=("domain", "target_t")),
        _table("Clean accuracy", ["Domain"], comp.clean, a, b, keys=("domain",)),
        _table(
            "Length overhead (% change in CoT length)",
            ["Domain", "Intervention", "Category"],
            comp.length,
            a,
            b,
            keys=("domain", "intervention", "category"),
            pct=True,
        ),
    ]
    return Section(f"Comparison: {a} → {b}", comp.summary, figures=figs, tables=tables)


def comparison_figure(comp: Comparison, domain: str) -> Figure | None:
    """Grouped bars of majority robustness per intervention (before light, after solid, coloured by
    category) beside the pooled majority-vs-timestep curves of both runs."""
    ivs = [r for r in comp.by_intervention if r["domain"] == domain]
    ts = [r for r in comp.by_timestep if r["domain"] == domain]
    if not ivs:
        return None
    a, b = comp.labels
    with figures._style():
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
        fig.legend(
            [Patch(facecolor="#bbbbbb", edgecolor="#777777", hatch="///", alpha=0.6), Patch(facecolor="#555555")],
            [a, b],
            loc="outside lower center",
            ncols=2,
            frameon=False,
        )
        ax_bar.grid(True, axis="y", color="#e6e6e6", linewidth=0.6)
        ax_bar.set_axisbelow(True)
        tv = [r["target_t"] for r in ts]
        ax_t.plot(tv, [r["before"] for r in ts], color="#888888", linestyle="--", marker="o", markersize=3, label=a)
        ax_t.plot(tv, [r["after"] for r in ts], color="#222222", marker="o", markersize=3, label=b)
        ax_t.set_xticks(tv, [fmt.timestep(t) for t in tv])
        ax_t.set_ylim(0, 1.05)
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
        "and per timestep, pooled over models.",
    )


def compare_reports(before: ReportData, after: ReportData, labels: Sequence[str] = ("before", "after")) -> ReportData:
    """A `ReportData` holding only the comparison section and both runs' metadata, ready for `write_report`."""
    comp = compute_comparison(before, after, labels)
    a, b = comp.labels
    return ReportData(
        title=f"Recovery comparison: {a} → {b}",
        meta={a: dict(before.meta), b: dict(after.meta)} if (before.meta or after.meta) else {},
        sections=(comparison_section(comp), _metadata_section(before, after, comp.labels)),
        standard=False,
    )


def write_comparison(
    before: ReportData, after: ReportData, out_dir: str | os.PathLike, labels: Sequence[str] = ("before", "after")
) -> ReportPaths:
    """Compute the comparison and write it as ``report.md`` / ``report.html`` / ``figures/`` in ``out_dir``."""
    return write_report(compare_reports(before, after, labels), out_dir)


# ----------------------------------------------------------------------------------------------- helpers


def _pair(rows_before, rows_after, column: str, scale_delta: float = 100.0) -> dict[str, float]:
    b, a = pooled(rows_before, column), pooled(rows_after, column)
    return {"before": b, "after": a, "delta": _delta(b, a, scale_delta)}


def _delta(before: float, after: float, scale: float = 100.0) -> float:
    return (after - before) * scale if not (math.isnan(before) or math.isnan(after)) else math.nan


def _chains(rows) -> int:
    return sum(int(r["n_chains"]) for r in rows)


def _clean(data: ReportData, domain: str) -> tuple[float, int]:
    # Weighted by n; an entry with unknown n (0) counts once rather than vanishing.
    entries = [c for c in data.clean if c["domain"] == domain and not math.isnan(c["accuracy"])]
    weights = [c["n"] if c["n"] > 0 else 1 for c in entries]
    if not entries:
        return math.nan, 0
    return sum(c["accuracy"] * w for c, w in zip(entries, weights)) / sum(weights), sum(c["n"] for c in entries)


def _nan0(v: float) -> float:
    return 0.0 if math.isnan(v) else v


def _table(
    title,
    key_cols,
    rows: Sequence[Mapping[str, Any]],
    a: str,
    b: str,
    *,
    keys,
    prefix: str = "",
    extra=(),
    pct: bool = False,
) -> Table:
    value = (lambda v: fmt.signed(v)) if pct else fmt.num
    cols = [*key_cols, a, b, "Δ points", *(f"chains ({a})" if e == "chains_before" else f"chains ({b})" for e in extra)]
    body = []
    for r in rows:
        keyvals = [fmt.timestep(r[k]) if k == "target_t" else str(r[k]) for k in keys]
        body.append(
            [
                *keyvals,
                value(r[f"{prefix}before"]),
                value(r[f"{prefix}after"]),
                fmt.signed(r[f"{prefix}delta"]),
                *(str(r[e]) for e in extra),
            ]
        )
    return Table(title, cols, body, align="l" * len(key_cols) + "r" * (3 + len(extra)))


def _metadata_section(before: ReportData, after: ReportData, labels: Sequence[str]) -> Section:
    from recovery.report.tables import metadata_table

    tabs = []
    for label, data in zip(labels, (before, after)):
        if data.meta:
            tabs.append(replace(metadata_table(data.meta), title=f"Run metadata — {label}"))
    return Section("Runs compared", "" if tabs else "_No run metadata was provided._", tables=tabs)
