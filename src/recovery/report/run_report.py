"""The report of one run directory: its aggregates, clean accuracy, skips and metadata, plus every stored
analysis section, rendered to ``RUN_DIR/report/``. An analysis stores its section and rewrites the report
with `store_section`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from recovery.plan import plan_for
from recovery.report.data import ReportData, Section
from recovery.report.render import write_report
from recovery.report.sections import OUTCOME
from recovery.report.sections_store import load_sections, save_section
from recovery.run_config import RunConfig
from recovery.run_dir import REPORT_DIR, Run, grade_verdicts, open_run, summary_skips
from recovery.run_dir.state import run_state


def run_report_data(
    run: Run,
    config: RunConfig,
    skips: list[dict[str, Any]] | None = None,
    outcome: Mapping[str, Any] | None = None,
) -> ReportData:
    """The `ReportData` of a run directory (aggregates, clean accuracy, skips, metadata, stored sections).

    ``outcome``: what the invocation measured (`recovery.pipeline.RunSummary`'s ``outcome``, ``warnings``
    and ``failed_requests``); None reads the last invocation's from ``summary.json``. A run that measured
    nothing says why instead of only "nothing graded yet"."""
    run = open_run(run)
    plan = plan_for(config)
    meta = {
        # Whose protocol the numbers follow (`recovery.plan`): "default", or "reference" with the commit.
        "protocol": plan.label,
        "run_dir": str(run.path),
        "dataset": config.dataset.name,
        "models": ", ".join(m.name for m in config.models),
        "interventions": ", ".join(config.interventions.names),
        "timesteps": ", ".join(str(t) for t in config.interventions.timesteps),
        "continuations per chain (N)": config.continuation.n,
        "continuation decoding": f"T={config.continuation.temperature}, top_p={config.continuation.top_p}",
        "seed": config.interventions.seed,
        "grading": plan.grading.protocol(),
        "grades by verdict": grade_verdicts(run),
        **outcome_meta(run if outcome is None else outcome),
    }
    data = ReportData.from_dicts(
        rows=run.aggregates(),
        clean=run.clean_accuracy(),
        skips=skips,
        meta=meta,
        sections=load_sections(run.path, run_state(run).record()),
        title=config.title,
    )
    return replace(data, length=plan.length)


def outcome_meta(source: Run | Mapping[str, Any]) -> dict[str, str]:
    """The report's metadata entries for what a run measured (`OUTCOME`: why nothing; failed requests per
    stage with their reasons; warnings), from a summary mapping or the run's ``summary.json``."""
    if not isinstance(source, Mapping):
        source = open_run(source).summary()
    meta = {}
    if source.get("outcome"):
        meta[OUTCOME] = str(source["outcome"])
    failed = source.get("failed_requests") or []
    if failed:
        meta["failed requests"] = "; ".join(f"{f['stage']}: {f['count']} of {f['of']} {f['reason']}" for f in failed)
    if source.get("warnings"):
        meta["warnings"] = "; ".join(source["warnings"])
    return meta


def write_run_report(
    run: Run,
    config: RunConfig,
    skips: list[dict[str, Any]] | None = None,
    outcome: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``report/report.md`` and ``report/report.html`` for a run directory; returns the HTML path."""
    paths = write_report(run_report_data(run, config, skips, outcome), run.path / REPORT_DIR)
    return Path(paths.html)


def rewrite_report(run_dir: str | Path | Run, config: RunConfig | None = None) -> Path:
    """Rewrite ``RUN_DIR/report`` from what the run directory stores (its config unless ``config`` is given,
    skips over the whole run, every stored analysis section): after an analysis stored its section, or for
    ``recovery report``; returns the HTML path. `recovery.configs.ConfigError` for a folder that is not a run
    directory."""
    run = open_run(run_dir)
    return write_run_report(run, config or run.config, summary_skips(run, Counter()))


def store_section(run_dir: str | Path | Run, name: str, section: Section, *, partial: bool | None = None) -> Path:
    """Store ``section`` as analysis ``name`` of the run in ``run_dir`` (`RUN_DIR/analysis/<name>/`, see
    `recovery.report.sections_store`) and rewrite the run's report with it; returns the report's HTML path.
    A folder that is not a run directory is refused (`recovery.configs.ConfigError`) before anything is
    written. A run that is not finished (`recovery.run_dir.state`) is refused in one line too, unless a partial
    result was asked for (``partial``; None: the command's ``--partial``): the section then keeps what it was
    computed on, and every report shows it as partial."""
    run = open_run(run_dir)
    config = run.config  # read first: a folder without a manifest is refused here
    save_section(run.path, name, section, partial=partial)
    return rewrite_report(run, config)
