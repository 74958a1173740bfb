"""Consecutive interventions (paper App. A.2, Table 10): accuracy by the number of interventions k."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from recovery.analysis.ablations.pivots import (
    Pivot,
    domains_section,
    file_cell,
    line_figure,
    mean_pivot,
    pivot_table,
    rounded_t,
    slug,
)
from recovery.metrics import ChainOutcome
from recovery.report import fmt
from recovery.report.data import Figure, Section, Table


@dataclass(frozen=True)
class RepeatCell:
    """Chains of one model and intervention at one t under k consecutive interventions."""

    model: str
    domain: str
    intervention: str
    k: int
    n_chains: int
    n_samples: int
    correct: int
    majority_robust: int
    run: str

    @property
    def accuracy(self) -> float:
        """Correct continuations / graded continuations (NaN when none were graded)."""
        return self.correct / self.n_samples if self.n_samples else math.nan

    @property
    def majority(self) -> float:
        return self.majority_robust / self.n_chains if self.n_chains else math.nan


@dataclass(frozen=True)
class RepeatsResult:
    target_t: float
    cells: tuple[RepeatCell, ...]
    duplicates: tuple[RepeatCell, ...]

    def domains(self) -> list[str]:
        return sorted({c.domain for c in self.cells})


def repeat_cells(runs: Sequence[tuple[int, str, Iterable[ChainOutcome]]], target_t: float = 0.3) -> RepeatsResult:
    """Pool the chain outcomes at ``target_t`` of each (k, run) per (model, domain, intervention).

    A (model, domain, intervention, k) found in more than one run is taken from the first; later ones are
    returned as ``duplicates``.
    """
    t = rounded_t(target_t)
    cells: dict[tuple, RepeatCell] = {}
    duplicates = []
    for k, run, outcomes in runs:
        sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for o in outcomes:
            if rounded_t(o.target_t) != t:
                continue
            s = sums[(o.model, o.domain, o.intervention)]
            s[0] += 1
            s[1] += o.n
            s[2] += o.k
            s[3] += int(o.levels.majority)
        for (model, domain, intervention), (chains, n, correct, maj) in sorted(sums.items()):
            cell = RepeatCell(model, domain, intervention, int(k), chains, n, correct, maj, run)
            file_cell(cells, duplicates, (model, domain, intervention, int(k)), cell)
    ordered = sorted(cells.values(), key=lambda c: (c.domain, c.model, c.intervention, c.k))
    return RepeatsResult(t, tuple(ordered), tuple(duplicates))


def repeats_pivot(result: RepeatsResult, domain: str, value: Callable[[RepeatCell], float]) -> Pivot:
    """Table 10 layout: one row per model (``model / intervention`` when several interventions), one
    column per k; ``value`` picks the number (e.g. accuracy in %)."""
    cells = [c for c in result.cells if c.domain == domain]
    several = len({c.intervention for c in cells}) > 1
    label = (lambda c: f"{c.model} / {c.intervention}") if several else (lambda c: c.model)
    return mean_pivot(cells, label, lambda c: c.k, value)


def repeats_section(
    result: RepeatsResult, run_labels: Sequence[str], notes: Sequence[str] = (), figures: bool = True
) -> Section:
    """The report section of the consecutive-interventions ablation (Table 10 per domain)."""
    ivs = sorted({c.intervention for c in result.cells})
    lines = [
        f"Accuracy (% of graded continuations that are correct) after k consecutive interventions "
        f"({', '.join(ivs) or 'none'}) at t = {fmt.timestep(result.target_t)}, one run per k (paper App. A.2, "
        "Table 10). Runs: " + ", ".join(f"`{r}`" for r in run_labels) + ".",
        *notes,
    ]
    if result.duplicates:
        lines.append(
            f"{len(result.duplicates)} group(s) appeared in more than one run with the same k; the first is used."
        )

    def domain_tables(domain: str) -> tuple[list[Table], Callable[[], Figure]]:
        acc = repeats_pivot(result, domain, lambda c: 100.0 * c.accuracy)
        maj = repeats_pivot(result, domain, lambda c: 100.0 * c.majority)
        one = lambda v: fmt.num(v, 1)
        tables = [
            pivot_table(
                acc,
                f"Accuracy (%) under k consecutive interventions — {domain}",
                "Model",
                one,
                "Paper Table 10: columns are the number of interventions k.",
                header=lambda k: f"k={k}",
            ),
            pivot_table(
                maj,
                f"Majority robustness (%) under k consecutive interventions — {domain}",
                "Model",
                one,
                header=lambda k: f"k={k}",
            ),
        ]
        return tables, lambda: repeats_figure(acc, domain)

    counts = Table(
        "Counts behind the tables",
        ["Model", "Domain", "Intervention", "k", "Chains", "Continuations", "Correct", "Run"],
        [
            [c.model, c.domain, c.intervention, str(c.k), str(c.n_chains), str(c.n_samples), str(c.correct), c.run]
            for c in result.cells
        ],
        "llllrrrl",
        collapsed=True,
    )
    return domains_section(
        "Ablation: consecutive interventions", lines, result.domains(), domain_tables, figures, [counts]
    )


# --------------------------------------------------------------------------------------------- figures


def repeats_figure(acc: Pivot, domain: str) -> Figure:
    """Accuracy vs number of consecutive interventions, one line per model."""
    from recovery.report.figures import model_colors  # lazy: loads matplotlib

    def draw(ax) -> None:  # noqa: ANN001 — a matplotlib Axes
        colors = model_colors(list(acc.index))
        ks = list(acc.columns)
        for label, line in zip(acc.index, acc.cells):
            ax.plot(ks, list(line), marker="o", markersize=3, linewidth=1.3, color=colors[label], label=label)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("consecutive interventions k")
        ax.set_ylabel("accuracy (%)")

    return line_figure(
        f"ablation_repeats_{slug(domain)}",
        f"Accuracy under consecutive interventions — {domain}",
        "Accuracy (%) per model vs k (Table 10).",
        draw,
    )
