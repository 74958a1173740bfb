"""Before/after comparison of two runs (``recovery compare RUN_A RUN_B``, the demo's training report).

Only what both runs measured is compared: the cells (domain, intervention, timestep, N) both hold, for
the models that pair up (see `recovery.report.pairing`), and within them the chains both have. Every
change has a 95 % interval paired over those chains: majority robustness per intervention, category,
timestep and cell (points), clean accuracy (points, paired over problems) and the length overhead
(``whole_pct``, the paper's definition; change in points). What only one run measured is listed, with
its chain counts; two runs that share nothing are refused with `NothingToCompare`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import recovery.report.fmt as fmt
from recovery.report.compare_rows import PARTS, IntervalConfig, chain_rows, clean_rows
from recovery.report.compare_section import comparison_figure, comparison_section, metadata_section
from recovery.report.comparison import Comparison
from recovery.report.data import ReportData
from recovery.report.outcomes import RunOutcomes
from recovery.report.pairing import NothingToCompare, describe_cells, pair_chains, pair_clean, pair_label
from recovery.report.render import ReportPaths, write_report

RunLike = RunOutcomes | str | os.PathLike

__all__ = [
    "Comparison",
    "IntervalConfig",
    "NothingToCompare",
    "RunOutcomes",
    "compare_reports",
    "comparison_figure",
    "comparison_report",
    "comparison_section",
    "compute_comparison",
    "summary_text",
    "write_comparison",
]


def compute_comparison(
    before: RunLike,
    after: RunLike,
    labels: Sequence[str] = ("before", "after"),
    *,
    clean_runs: tuple[RunLike, RunLike] | None = None,
    intervals: IntervalConfig = IntervalConfig(),
) -> Comparison:
    """Compare two runs (run directories or `RunOutcomes`); see `Comparison`.

    ``clean_runs``: two more runs (before, after) that measured clean accuracy on their own, larger
    problem set (the demo's ``before-clean``/``after-clean``); reported beside the runs' own clean accuracy.
    Raises `NothingToCompare` when the runs share no model, cell or chain.
    """
    a_label, b_label = (str(x) for x in labels)
    b, a = _outcomes(before), _outcomes(after)
    pairing = pair_chains(b, a, (a_label, b_label))
    parts = chain_rows(pairing, intervals)
    clean = clean_rows(pair_clean(b, a, pairing.models), intervals)
    extra = ()
    if clean_runs is not None:
        cb, ca = (_outcomes(r) for r in clean_runs)
        extra = tuple(clean_rows(pair_clean(cb, ca), intervals))
    side = (a_label, b_label)
    comp = Comparison(
        labels=(a_label, b_label),
        **{k: tuple(parts[k]) for k in PARTS},
        clean=tuple(clean),
        clean_runs=extra,
        models=pairing.models,
        cells_left_out=tuple({**c, "side": side[c["side"]]} for c in pairing.cells_left_out),
        models_left_out=tuple({**m, "side": side[m["side"]]} for m in pairing.models_left_out),
        meta=(dict(b.meta), dict(a.meta)),
        confidence=intervals.confidence,
    )
    return replace(comp, summary=summary_text(comp))


def _outcomes(run: RunLike) -> RunOutcomes:
    return run if isinstance(run, RunOutcomes) else RunOutcomes.load(run)


def summary_text(comp: Comparison) -> str:
    """Markdown bullets: one per domain (majority robustness with its per-category changes and their
    intervals, clean
    accuracy, length overhead), then the models compared and what was left out."""
    a, b = comp.labels
    level = f"{round(100 * comp.confidence)} %"
    lines = [
        f"Changes from **{a}** to **{b}** on what both runs measured (points = percentage points; in "
        f"brackets the {level} interval, paired over the shared chains or problems; pooled chains are "
        "clustered by problem, the unit of sampling):",
        "",
    ]
    clean = {r["domain"]: r for r in comp.clean}
    extra = {r["domain"]: r for r in comp.clean_runs}
    for o in comp.overall:
        d = o["domain"]
        cats = "; ".join(f"{c['category']} {_change(c)}" for c in comp.by_category if c["domain"] == d)
        parts = [
            f"majority robustness {fmt.num(o['majority_before'])} → {fmt.num(o['majority_after'])} "
            f"({_change(o, 'majority_')}, {o['majority_pairs']} paired chains of {o['majority_problems']} problems, "
            f"{o['majority_interval']}{'; ' + cats if cats else ''})"
        ]
        if d in clean:
            parts.append(_clean_text("clean accuracy", clean[d]))
        if o["length_pairs"]:
            parts.append(
                f"length overhead {fmt.signed(o['length_before'])} % → {fmt.signed(o['length_after'])} % "
                f"({_change(o, 'length_')}, {o['length_interval']})"
            )
        if d in extra:
            parts.append(_clean_text("clean accuracy on the separate clean set", extra[d]))
        lines.append(f"- **{d}**: " + "; ".join(parts) + ".")
    for d in sorted(set(extra) - {o["domain"] for o in comp.overall}):
        lines.append(f"- **{d}**: {_clean_text('clean accuracy on the separate clean set', extra[d])}.")
    lines.append("- Compared: " + ", ".join(pair_label(m) for m in comp.models) + ".")
    lines.extend(left_out_lines(comp))
    return "\n".join(lines)


def left_out_lines(comp: Comparison) -> list[str]:
    """Bullets naming what only one run measured (cells, models) and the unmatched chains of shared cells."""
    lines = []
    for side in comp.labels:
        cells = [c for c in comp.cells_left_out if c["side"] == side]
        if cells:
            lines.append(f"- Left out, only in {side}: {describe_cells(cells)}.")
        models = [m for m in comp.models_left_out if m["side"] == side]
        if models:
            named = ", ".join(f"{m['model']} ({m['chains']} chains)" for m in models)
            lines.append(f"- Models left out, only in {side}: {named}.")
    lone_b = sum(o["majority_before_only"] for o in comp.overall)
    lone_a = sum(o["majority_after_only"] for o in comp.overall)
    if lone_b or lone_a:
        lines.append(
            f"- Chains of shared cells without a partner, left out: {lone_b} in {comp.labels[0]}, "
            f"{lone_a} in {comp.labels[1]}."
        )
    return lines


def _change(row: Mapping[str, Any], prefix: str = "") -> str:
    interval = fmt.MISSING
    if not (fmt.is_missing(row[f"{prefix}ci_low"]) or fmt.is_missing(row[f"{prefix}ci_high"])):
        interval = f"[{fmt.signed(row[f'{prefix}ci_low'])}, {fmt.signed(row[f'{prefix}ci_high'])}]"
    return f"{fmt.signed(row[f'{prefix}delta'])} points {interval}"


def _clean_text(title: str, r: Mapping[str, Any]) -> str:
    n = f"{r['n_before']}" if r["n_before"] == r["n_after"] else f"{r['n_before']} / {r['n_after']}"
    paired = f", {r['pairs']} paired, {r['interval']}" if r["pairs"] else ", not paired"
    return f"{title} {fmt.num(r['before'])} → {fmt.num(r['after'])} on {n} problems ({_change(r)}{paired})"


def comparison_report(comp: Comparison) -> ReportData:
    """A `ReportData` holding only the comparison section and both runs' metadata, ready for `write_report`."""
    a, b = comp.labels
    return ReportData(
        title=f"Recovery comparison: {a} → {b}",
        meta={a: dict(comp.meta[0]), b: dict(comp.meta[1])} if any(comp.meta) else {},
        sections=(comparison_section(comp), metadata_section(comp)),
        standard=False,
    )


def compare_reports(
    before: RunLike,
    after: RunLike,
    labels: Sequence[str] = ("before", "after"),
    *,
    clean_runs: tuple[RunLike, RunLike] | None = None,
) -> ReportData:
    """`compute_comparison` then `comparison_report`."""
    return comparison_report(compute_comparison(before, after, labels, clean_runs=clean_runs))


def write_comparison(
    before: RunLike,
    after: RunLike,
    out_dir: str | os.PathLike,
    labels: Sequence[str] = ("before", "after"),
    *,
    clean_runs: tuple[RunLike, RunLike] | None = None,
) -> ReportPaths:
    """Compute the comparison and write it as ``report.md`` / ``report.html`` / ``figures/`` in ``out_dir``."""
    return write_report(compare_reports(before, after, labels, clean_runs=clean_runs), out_dir)
