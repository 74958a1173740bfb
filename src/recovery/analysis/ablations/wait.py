"""Append "Wait" (paper Tables 7–8): base and Wait runs matched row by row, percentage-point changes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.analysis.ablations.pivots import (
    Pivot,
    domains_section,
    index_rows,
    line_figure,
    majority_of,
    mean_pivot,
    nan_mean,
    pivot_table,
    signed2,
    slug,
)
from recovery.report import fmt
from recovery.report.data import (
    Figure,
    Section,
    Table,
    category_of,
    order_interventions,
)


@dataclass(frozen=True)
class WaitDelta:
    """One matched (model, domain, intervention, t) group: majority robustness without and with "Wait"."""

    model: str
    domain: str
    intervention: str
    target_t: float
    base: float
    wait: float
    base_chains: int
    wait_chains: int

    @property
    def delta_pp(self) -> float:
        """Change in percentage points (wait − base) × 100."""
        return 100.0 * (self.wait - self.base)


@dataclass(frozen=True)
class Unmatched:
    """An aggregate group that has no counterpart (or no majority value): ``run`` names where it was found."""

    run: str
    model: str
    domain: str
    intervention: str
    target_t: float
    reason: str


@dataclass(frozen=True)
class WaitComparison:
    deltas: tuple[WaitDelta, ...]
    unmatched: tuple[Unmatched, ...]

    def domains(self) -> list[str]:
        return sorted({d.domain for d in self.deltas})


def match_wait(base_rows: Iterable[Mapping[str, Any]], wait_rows: Iterable[Mapping[str, Any]]) -> WaitComparison:
    """Pair the base run's and the Wait run's aggregate rows by (model, domain, intervention, target_t)."""
    base, wait = index_rows(base_rows, "base run"), index_rows(wait_rows, "wait run")
    deltas, unmatched = [], []
    for key in sorted(set(base) | set(wait), key=str):
        if key not in wait:
            unmatched.append(Unmatched("base", *key, "only in the base run"))
            continue
        if key not in base:
            unmatched.append(Unmatched("wait", *key, "only in the wait run"))
            continue
        b, w = majority_of(base[key]), majority_of(wait[key])
        if math.isnan(b) or math.isnan(w):
            which = "base" if math.isnan(b) else "wait"
            unmatched.append(Unmatched(which, *key, "no majority robustness value"))
            continue
        deltas.append(WaitDelta(*key, b, w, int(base[key].get("n_chains") or 0), int(wait[key].get("n_chains") or 0)))
    return WaitComparison(tuple(deltas), tuple(unmatched))


def wait_by_model(comp: WaitComparison, domain: str) -> Pivot:
    """Table 7: mean pp change per (t, model), averaged across interventions."""
    return mean_pivot(
        (d for d in comp.deltas if d.domain == domain), lambda d: d.target_t, lambda d: d.model, lambda d: d.delta_pp
    )


def wait_by_intervention(comp: WaitComparison, domain: str) -> Pivot:
    """Table 8: mean pp change per (t, intervention), averaged across models."""
    return mean_pivot(
        (d for d in comp.deltas if d.domain == domain),
        lambda d: d.target_t,
        lambda d: d.intervention,
        lambda d: d.delta_pp,
        column_order=order_interventions,
    )


def wait_section(
    comp: WaitComparison, *, base_label: str, wait_label: str, notes: Sequence[str] = (), figures: bool = True
) -> Section:
    """The report section of the append-"Wait" ablation (Tables 7–8, every matched row, the unmatched)."""
    overall = nan_mean([d.delta_pp for d in comp.deltas])
    lines = [
        f'Majority robustness of **{wait_label}** ("Wait" appended after every intervention) minus that of '
        f"**{base_label}**, in percentage points (paper §5, Tables 7–8). Groups are matched by model, domain, "
        f"intervention and timestep: {len(comp.deltas)} matched, {len(comp.unmatched)} unmatched. "
        f"Mean change over matched groups: {fmt.signed(overall, 2)} pp.",
        *notes,
    ]

    def domain_tables(domain: str) -> tuple[list[Table], Callable[[], Figure]]:
        by_model = wait_by_model(comp, domain)
        by_iv = wait_by_intervention(comp, domain)
        tables = [
            pivot_table(
                by_model,
                f"Change in majority robustness (pp), averaged across interventions — {domain}",
                "t",
                signed2,
                "Paper Table 7: rows are timesteps, columns models.",
            ),
            pivot_table(
                by_iv,
                f"Change in majority robustness (pp), averaged across models — {domain}",
                "t",
                signed2,
                "Paper Table 8: rows are timesteps, columns interventions.",
                header=lambda iv: f"{iv} ({category_of(iv)})",
            ),
        ]
        return tables, lambda: wait_figure(by_iv, domain)

    matched = Table(
        "Every matched group",
        ["Model", "Domain", "Intervention", "t", "Chains (base/wait)", "Base", "Wait", "Δ pp"],
        [
            [
                d.model,
                d.domain,
                d.intervention,
                fmt.timestep(d.target_t),
                f"{d.base_chains}/{d.wait_chains}",
                fmt.num(d.base),
                fmt.num(d.wait),
                signed2(d.delta_pp),
            ]
            for d in comp.deltas
        ],
        "llllrrrr",
        collapsed=True,
    )
    closing = [matched, unmatched_table(comp.unmatched)] if comp.unmatched else [matched]
    return domains_section(
        'Ablation: appending "Wait" after the intervention', lines, comp.domains(), domain_tables, figures, closing
    )


def unmatched_table(unmatched: Sequence[Unmatched]) -> Table:
    """Groups that could not be compared, with where they were found and why."""
    return Table(
        "Unmatched groups",
        ["Run", "Model", "Domain", "Intervention", "t", "Reason"],
        [[u.run, u.model, u.domain, u.intervention, fmt.timestep(u.target_t), u.reason] for u in unmatched],
        caption="Groups present in only one run (or without a majority value) are left out of every average.",
    )


# --------------------------------------------------------------------------------------------- figures


def wait_figure(by_iv: Pivot, domain: str) -> Figure:
    """pp change vs timestep, one line per intervention coloured by category, with a zero line."""
    from recovery.report.figures import category_color  # lazy: loads matplotlib

    def draw(ax) -> None:  # noqa: ANN001 — a matplotlib Axes
        ts = list(by_iv.index)
        markers = "osD^vP*X"
        for j, iv in enumerate(by_iv.columns):
            ax.plot(
                ts,
                [line[j] for line in by_iv.cells],
                marker=markers[j % len(markers)],
                markersize=3,
                linewidth=1.3,
                color=category_color(category_of(iv)),
                label=iv,
            )
        ax.axhline(0.0, color="#444444", linewidth=0.8)
        ax.set_xticks(ts, [fmt.timestep(t) for t in ts])
        ax.set_xlabel("timestep t")
        ax.set_ylabel("Δ majority robustness (pp)")

    return line_figure(
        f"ablation_wait_{slug(domain)}",
        f'Appending "Wait": change per intervention — {domain}',
        'Change in majority robustness from appending "Wait", averaged across models (Table 8).',
        draw,
    )
