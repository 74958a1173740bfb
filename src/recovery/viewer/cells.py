"""The viewer's index: one row per cell (model × domain × intervention × timestep) with the figures the report
shows for it, and where the run stands.

A finished run's cells are its ``aggregates.json`` (what the report reads), formatted by the report's own
`recovery.report.tables.cell_figures`, so the viewer and the report show the same strings. A run still being
written (or one whose aggregate stage has not run) has its cells computed now, from the same per-chain tallies, by
the aggregate stage's own `recovery.pipeline.aggregate.aggregate_tallies`, and is marked "partial: N of M".
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.configs import ConfigError
from recovery.pipeline.aggregate import aggregate_tallies
from recovery.report.data import ReportData, category_of
from recovery.report.tables import cell_columns, cell_figures
from recovery.report.viewer_links import cell_query
from recovery.run_dir.state import RunState, run_state
from recovery.viewer.chains import RunChains

# Bootstrap draws for the length intervals of cells computed live (the stored aggregates keep the run's own).
LIVE_BOOTSTRAP = 200


@dataclass(frozen=True)
class Cell:
    """One cell: its key, its category and the report's figures for it (`cell_columns`)."""

    model: str
    domain: str
    intervention: str
    category: str
    t: float
    figures: list[str]


@dataclass(frozen=True)
class RunCells:
    """The index of a run: its cells, the column names of their figures, where they come from, and the
    ``partial`` note ("partial: N of M continuations graded; why") of a run that is not complete ("" otherwise)."""

    cells: list[Cell]
    columns: list[str]
    source: str
    partial: str
    counts: dict[str, int]


def run_cells(chains: RunChains) -> RunCells:
    """The `RunCells` of the run ``chains`` reads (see the module doc)."""
    run = chains.run
    state = _state(chains)
    stored = run.aggregates() if state.complete else []
    if stored:
        rows, source = stored, "aggregates.json (as the report shows them)"
    else:
        rows = [r.flat() for r in aggregate_tallies(chains.tallies, n_boot=LIVE_BOOTSTRAP)]
        source = "computed now from the graded continuations, as the aggregate stage does"
    data = ReportData.from_dicts(rows)
    cells = []
    for domain in data.domains():
        for model in data.models(domain):
            for intervention in data.interventions(domain):
                for t in data.timesteps(domain):
                    row = data.row(model, domain, intervention, t)
                    if row is not None:
                        category = data.category(intervention) or category_of(intervention)
                        cells.append(Cell(model, domain, intervention, category, t, cell_figures(row)))
    counts = {
        "problems": len(chains.problems),
        "chains": len(chains),
        "continuations": chains.continuations.rows,
        "graded": chains.grades.rows,
    }
    return RunCells(cells, cell_columns(), source, "" if state.complete else state.partial_note(), counts)


def _state(chains: RunChains) -> RunState:
    """The run's state; a folder without a readable config (built by hand) counts what it holds."""
    try:
        return run_state(chains.run)
    except (ConfigError, ValueError):
        graded = chains.grades.rows
        return RunState(writer="", finished=None, graded=graded, expected=graded)


def cell_link(cell: Cell) -> dict[str, str]:
    """The query of a cell's chains (``/chains?model=…&domain=…&intervention=…&t=…``), as the report links it."""
    return cell_query(cell.model, cell.domain, cell.intervention, cell.t)
