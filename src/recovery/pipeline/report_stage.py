"""The report stage: ``report/report.md`` and ``report/report.html`` from what the run directory holds."""

from __future__ import annotations

from recovery.pipeline.context import Stage, StageContext
from recovery.run_dir import summary_skips


def stage_report(ctx: StageContext) -> None:
    """Write the run's report (its skip table from the stored skips and this invocation's, and what this
    invocation measured or why nothing); it writes no rows."""
    import recovery.report.run_report as run_report  # figures (matplotlib) load only for the report

    skips = summary_skips(ctx.run, ctx.log.counts)
    outcome = {"outcome": ctx.outcome, "warnings": ctx.warnings, "failed_requests": ctx.log.requests.rows()}
    ctx.report = str(run_report.write_run_report(ctx.run, ctx.config, skips, outcome=outcome))


STAGE = Stage("report", stage_report, "report.md and report.html", command=False)
