"""Run reports: Markdown and a self-contained HTML page with the paper's figures and tables.

Build a `ReportData` from the pipeline's aggregate rows (`recovery.metrics.AggregateRow.flat()` dicts),
clean accuracy, skip counts and run metadata, then call `write_report`::

    data = ReportData.from_dicts(rows, clean=clean, skips=skips, meta=meta)
    paths = write_report(data, run_dir / "report")

`write_comparison(before, after, out_dir, labels)` writes the before/after report of two runs; other
analyses add `Section`s (prose, `Figure`s, `Table`s) with `ReportData.with_sections`.
"""

from recovery.report.compare import (
    Comparison,
    compare_reports,
    comparison_section,
    compute_comparison,
    write_comparison,
)
from recovery.report.data import Figure, ReportData, Section, Table, category_of
from recovery.report.render import RenderedReport, ReportPaths, render_report, write_report

__all__ = [
    "Comparison",
    "Figure",
    "RenderedReport",
    "ReportData",
    "ReportPaths",
    "Section",
    "Table",
    "category_of",
    "compare_reports",
    "comparison_section",
    "compute_comparison",
    "render_report",
    "write_comparison",
    "write_report",
]
