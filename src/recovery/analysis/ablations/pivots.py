"""Shared helpers of the ablation sections: a small pivot type, means and matching of aggregate rows, the frame
of their line figures."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.report import fmt
from recovery.report.data import Figure, Section, Table

MAJORITY = "majority_mean"
T_DIGITS = 9  # target_t is compared after rounding, as the report does


def rounded_t(value: Any) -> float:
    return round(float(value), T_DIGITS)


def nan_mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


@dataclass(frozen=True)
class Pivot:
    """A 2-D table of means: ``cells[i][j]`` is the mean of the values filed under (index[i], columns[j])
    (NaN where none were), ``counts[i][j]`` how many values it averages."""

    index: tuple
    columns: tuple
    cells: tuple[tuple[float, ...], ...]
    counts: tuple[tuple[int, ...], ...]

    def cell(self, i: Any, j: Any) -> float:
        """The mean at row label ``i`` and column label ``j`` (KeyError for unknown labels)."""
        if i not in self.index or j not in self.columns:
            raise KeyError(f"no cell ({i!r}, {j!r}) in a pivot of {self.index} × {self.columns}")
        return self.cells[self.index.index(i)][self.columns.index(j)]


def mean_pivot(
    items: Iterable[Any],
    index: Callable[[Any], Any],
    column: Callable[[Any], Any],
    value: Callable[[Any], float],
    *,
    index_order: Callable[[Iterable[Any]], list] = sorted,
    column_order: Callable[[Iterable[Any]], list] = sorted,
) -> Pivot:
    """Group ``items`` by (index(item), column(item)) and average ``value(item)`` (NaN values skipped)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for item in items:
        groups[(index(item), column(item))].append(float(value(item)))
    rows = tuple(index_order({i for i, _ in groups}))
    cols = tuple(column_order({c for _, c in groups}))
    cells = tuple(tuple(nan_mean(groups.get((i, c), [])) for c in cols) for i in rows)
    counts = tuple(tuple(len(groups.get((i, c), [])) for c in cols) for i in rows)
    return Pivot(rows, cols, cells, counts)


def index_rows(rows: Iterable[Mapping[str, Any]], run: str) -> dict[tuple, Mapping[str, Any]]:
    out: dict[tuple, Mapping[str, Any]] = {}
    for i, row in enumerate(rows):
        missing = [k for k in ("model", "domain", "intervention", "target_t") if row.get(k) is None]
        if missing:
            raise ValueError(f"{run} aggregate row {i} lacks {', '.join(missing)}: {dict(row)}")
        key = (str(row["model"]), str(row["domain"]), str(row["intervention"]), rounded_t(row["target_t"]))
        if key in out:
            raise ValueError(f"{run} aggregate rows repeat model/domain/intervention/target_t {key}")
        out[key] = row
    return out


def majority_of(row: Mapping[str, Any]) -> float:
    value = row.get(MAJORITY)
    return math.nan if value is None else float(value)


def file_cell(cells: dict[tuple, Any], duplicates: list, key: tuple, cell: Any) -> None:
    """File ``cell`` under ``key``: the first run that has a group wins; the same group found again in a
    later run goes to ``duplicates`` (counted in the report, never averaged in)."""
    if key in cells:
        duplicates.append(cell)
    else:
        cells[key] = cell


def pivot_table(
    pivot: Pivot, title: str, corner: str, cell: Callable[[float], str], caption: str = "", header=str
) -> Table:
    """A report `Table` of ``pivot`` with formatted cells (row labels in the first column)."""
    rows = [
        [fmt.timestep(i) if isinstance(i, float) else str(i), *(cell(v) for v in line)]
        for i, line in zip(pivot.index, pivot.cells)
    ]
    columns = [corner, *(header(c) for c in pivot.columns)]
    return Table(title, columns, rows, "l" + "r" * len(pivot.columns), caption)


def domains_section(
    title: str,
    lines: Sequence[str],
    domains: Iterable[str],
    per_domain: Callable[[str], tuple[Sequence[Table], Callable[[], Figure]]],
    figures: bool,
    closing: Sequence[Table],
) -> Section:
    """An ablation's report section: its prose ``lines``, for each domain the tables ``per_domain`` gives (and
    its figure, drawn only when ``figures`` asks for figures), then the ``closing`` tables (the cells behind
    the tables). ``per_domain`` returns the figure as a function so that no figure is drawn in vain."""
    tables: list[Table] = []
    figs: list[Figure] = []
    for domain in domains:
        domain_tables, figure = per_domain(domain)
        tables.extend(domain_tables)
        if figures:
            figs.append(figure())
    tables.extend(closing)
    return Section(title, "\n\n".join(lines), tuple(figs), tuple(tables))


def signed2(v: float) -> str:
    return fmt.signed(v, 2)


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def line_figure(name: str, title: str, caption: str, draw: Callable[[Any], None]) -> Figure:
    """A one-panel line figure of an ablation, in the report's style: ``draw(ax)`` plots the labelled lines and
    names the axes; the grid, the legend of the lines under the panel and the title are the same for all."""
    from recovery.report.figures import figure_style, new_figure, to_png  # lazy: loads matplotlib

    with figure_style():
        fig = new_figure(figsize=(5.2, 3.0), layout="constrained")
        ax = fig.subplots()
        draw(ax)
        ax.grid(True, color="#e6e6e6", linewidth=0.6)
        fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize=7)
        fig.suptitle(title, fontsize=9)
        png = to_png(fig)
    return Figure(name, png, caption)
