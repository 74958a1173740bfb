"""Model swap (paper Table 9): one model continues another's intervened chains; mean robustness per pair."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.analysis.ablations.pivots import (
    Pivot,
    domains_section,
    file_cell,
    index_rows,
    majority_of,
    mean_pivot,
    pivot_table,
    rounded_t,
    slug,
)
from recovery.report import fmt
from recovery.report.data import Figure, Section, Table
from recovery.run_config import split_label


@dataclass(frozen=True)
class SwapCell:
    """Majority robustness of chains written by ``original`` and continued by ``swapped``."""

    original: str
    swapped: str
    domain: str
    intervention: str
    majority: float
    n_chains: int
    run: str


@dataclass(frozen=True)
class SwapResult:
    target_t: float
    cells: tuple[SwapCell, ...]
    duplicates: tuple[SwapCell, ...]  # the same group found again in a later run (left out)

    def domains(self) -> list[str]:
        return sorted({c.domain for c in self.cells})


def swap_cells(runs: Sequence[tuple[str, Iterable[Mapping[str, Any]]]], target_t: float = 0.3) -> SwapResult:
    """The (original, swapped, domain, intervention) groups at ``target_t`` of every run, in run order.

    A group found in more than one run (e.g. a model continuing its own chains in two swap runs) is taken
    from the first run that has it; later ones are returned as ``duplicates``.
    """
    t = rounded_t(target_t)
    cells: dict[tuple, SwapCell] = {}
    duplicates = []
    for run, rows in runs:
        for key, row in index_rows(rows, run).items():
            model, domain, intervention, row_t = key
            if row_t != t:
                continue
            original, swapped = split_label(model)
            cell = SwapCell(
                original, swapped, domain, intervention, majority_of(row), int(row.get("n_chains") or 0), run
            )
            file_cell(cells, duplicates, (original, swapped, domain, intervention), cell)
    ordered = sorted(cells.values(), key=lambda c: (c.domain, c.original, c.swapped, c.intervention))
    return SwapResult(t, tuple(ordered), tuple(duplicates))


def swap_matrix(result: SwapResult, domain: str) -> Pivot:
    """Table 9: majority robustness (%) per (original, swapped), averaged across interventions."""
    cells = [c for c in result.cells if c.domain == domain]
    models = sorted({c.original for c in cells} | {c.swapped for c in cells})
    # Square, same order on both axes: pairs that were not run show as NaN.
    order = lambda present: models
    return mean_pivot(
        cells,
        lambda c: c.original,
        lambda c: c.swapped,
        lambda c: 100.0 * c.majority,
        index_order=order,
        column_order=order,
    )


def swap_section(
    result: SwapResult, run_labels: Sequence[str], notes: Sequence[str] = (), figures: bool = True
) -> Section:
    """The report section of the model-swap ablation (Table 9 per domain, the groups behind it)."""
    lines = [
        f"Chains (original trace + intervention) written by the row model, continued by the column model, at "
        f"t = {fmt.timestep(result.target_t)} (paper §5, Table 9). Each cell is the majority robustness (%) "
        "averaged across interventions; the diagonal is a model continuing its own chains. Runs: "
        + ", ".join(f"`{r}`" for r in run_labels)
        + ".",
        *notes,
    ]
    if result.duplicates:
        lines.append(f"{len(result.duplicates)} group(s) appeared in more than one run; the first run's value is used.")

    def domain_tables(domain: str) -> tuple[list[Table], Callable[[], Figure]]:
        matrix = swap_matrix(result, domain)
        caption = (
            "Rows: original model; columns: swapped (continuing) model. Interventions averaged per cell: "
            + ", ".join(
                f"{o}→{s}: {n}"
                for o, line in zip(matrix.index, matrix.counts)
                for s, n in zip(matrix.columns, line)
                if n
            )
        )
        table = pivot_table(
            matrix,
            f"Majority robustness after swapping models (%) — {domain}",
            "Original \\ Swapped",
            lambda v: fmt.num(v, 1),
            caption,
        )
        return [table], lambda: swap_figure(matrix, domain, result.target_t)

    groups = Table(
        "Groups behind the matrix",
        ["Original", "Swapped", "Domain", "Intervention", "Chains", "Majority", "Run"],
        [
            [c.original, c.swapped, c.domain, c.intervention, str(c.n_chains), fmt.num(c.majority), c.run]
            for c in result.cells
        ],
        "llllrrl",
        collapsed=True,
    )
    return domains_section(
        "Ablation: continuing another model's chains (model swap)",
        lines,
        result.domains(),
        domain_tables,
        figures,
        [groups],
    )


# --------------------------------------------------------------------------------------------- figures


def swap_figure(matrix: Pivot, domain: str, target_t: float) -> Figure:
    """Heat map of the swap matrix with the values written in the cells."""
    from recovery.report.figures import figure_style, new_figure, to_png  # lazy: loads matplotlib

    with figure_style():
        n_rows, n_cols = len(matrix.index), len(matrix.columns)
        fig = new_figure(figsize=(1.2 * n_cols + 2.2, 0.6 * n_rows + 1.4), layout="constrained")
        ax = fig.subplots()
        image = ax.imshow([list(line) for line in matrix.cells], cmap="viridis", vmin=0.0, vmax=100.0, aspect="auto")
        for i, line in enumerate(matrix.cells):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(
                        j, i, f"{v:.1f}", ha="center", va="center", color="white" if v < 60 else "black", fontsize=8
                    )
        ax.set_xticks(range(n_cols), list(matrix.columns), rotation=30, ha="right")
        ax.set_yticks(range(n_rows), list(matrix.index))
        ax.set_xlabel("swapped (continuing) model")
        ax.set_ylabel("original model")
        fig.colorbar(image, ax=ax, label="majority robustness (%)")
        fig.suptitle(f"Model swap at t = {fmt.timestep(target_t)} — {domain}", fontsize=9)
        png = to_png(fig)
    return Figure(f"ablation_swap_{slug(domain)}", png, "Majority robustness (%) after swapping models (Table 9).")
