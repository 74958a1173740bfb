"""Run the benchmark's stages in order, resumably, and summarise what was done and skipped."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError, from_mapping, to_mapping
from recovery.pipeline import stages as st
from recovery.pipeline.aggregate import read_aggregates, read_clean_accuracy, stage_aggregate
from recovery.pipeline.backend import check_loadable, think_closers
from recovery.pipeline.continuations_stage import GENERATION_ERROR
from recovery.pipeline.validate import check_run_config
from recovery.run_config import ModelConfig, RunConfig
from recovery.store import RunDir, atomic_write_text

STAGES: tuple[str, ...] = ("problems", "traces", "filter", "chains", "continuations", "grades", "aggregate", "report")
MANIFEST = "config.json"
SUMMARY = "summary.json"
# Skips only the invocation that met them counts: failures the next run retries, so nothing is stored.
TRANSIENT_SKIPS = frozenset({("traces", "generation_error"), ("grades", "grading_alongside_failed")})
# Keys that may change between a run and its resumption without changing any result.
_RESUMABLE_KEYS = {"flush_every", "title", "wandb", "run_dir", "cpu_workers"}
_RESUMABLE_MODEL_KEYS = {"batch_size", "max_concurrency", "request_timeout_s", "base_url", "api_key"}
_RESUMABLE_GRADING_KEYS = {"workers", "alongside"}


@dataclass
class RunSummary:
    """What one invocation did: rows written per stage and skips per (stage, reason)."""

    run_dir: str
    written: dict[str, int] = field(default_factory=dict)
    skips: dict[str, int] = field(default_factory=dict)
    grades: dict[str, int] = field(default_factory=dict)  # the run's continuations by verdict (see grade_verdicts)
    report: str | None = None

    def skip_rows(self) -> list[dict[str, Any]]:
        return [
            {"stage": k.split("/")[0], "reason": k.split("/", 1)[1], "count": v} for k, v in sorted(self.skips.items())
        ]


def _results_part(mapping: dict[str, Any]) -> dict[str, Any]:
    """The part of a config mapping that can change a run's results (throughput, workers and where a
    server is reached are left out, so changing them never makes a run directory unresumable)."""

    def model(m: Any) -> Any:
        return {k: v for k, v in m.items() if k not in _RESUMABLE_MODEL_KEYS} if isinstance(m, dict) else m

    out = {k: v for k, v in mapping.items() if k not in _RESUMABLE_KEYS}
    out["models"] = [model(m) for m in out.get("models", [])]
    if isinstance(out.get("interventions"), dict):
        out["interventions"] = {**out["interventions"], "llm": model(out["interventions"].get("llm"))}
    if isinstance(out.get("grading"), dict):
        grading = {k: v for k, v in out["grading"].items() if k not in _RESUMABLE_GRADING_KEYS}
        out["grading"] = {**grading, "judge": model(grading.get("judge"))}
    return out


def _check_manifest(run: RunDir, config: RunConfig) -> None:
    """Refuse to resume a run directory with a config that would change its results."""
    current = _results_part(to_mapping(config))
    path = run.file(MANIFEST)
    if path.is_file():
        # Read the stored config back through the dataclasses, so fields added since the run was created
        # compare at their defaults instead of looking like a change.
        restored = from_mapping(RunConfig, json.loads(path.read_text()), where=str(path))
        stored = _results_part(to_mapping(restored))
        if stored != current:
            changed = sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))
            raise ConfigError(
                f"{run.path} was created with a different config (changed: {', '.join(changed)}); "
                "use a new run_dir or restore the original config to resume"
            )
    else:
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(to_mapping(config), indent=2, sort_keys=True, default=str))


def run_pipeline(
    config: RunConfig,
    *,
    stages: Sequence[str] = STAGES,
    make_generator: Callable[[ModelConfig], Any] | None = None,
    progress: bool = True,
    n_boot: int = 2000,
) -> RunSummary:
    """Run ``stages`` (default: all) of the benchmark described by ``config``.

    Safe to re-run at any time: finished records are skipped, so a killed run resumes where it stopped.
    ``make_generator`` builds a backend for a `ModelConfig` (default: `recovery.pipeline.backend`).
    """
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; stages are {', '.join(STAGES)}")
    check_run_config(config, stages=stages)  # before any work: a value the run cannot honour fails here
    if make_generator is None:  # the default backends load models: one that cannot be found fails here too
        for where, model in _models_of(config, stages):
            check_loadable(model, where=where)
    run = RunDir(config.run_dir)
    _check_manifest(run, config)
    run.clean_stale()
    if make_generator is None:
        from recovery.pipeline.backend import make_generator as default_factory

        def make_generator(model: ModelConfig):  # noqa: F811 — bind the run's seed
            return default_factory(model, seed=config.continuation.seed)

    ctx = st.StageContext(config=config, run=run, make_generator=make_generator, progress=progress)
    summary = RunSummary(run_dir=str(run.path))
    grader = None
    try:
        for stage in (s for s in STAGES if s in stages):
            if stage in ("filter", "grades") and grader is None:
                from recovery.grading import Grader

                grader = Grader(workers=config.grading.workers, timeout_s=config.grading.timeout_s)
            if stage == "problems":
                summary.written[stage] = st.stage_problems(ctx)
            elif stage == "traces":
                summary.written[stage] = st.stage_traces(ctx)
            elif stage == "filter":
                summary.written[stage] = st.stage_filter(ctx, grader)
            elif stage == "chains":
                summary.written[stage] = st.stage_chains(ctx)
            elif stage == "continuations":
                summary.written[stage] = st.stage_continuations(ctx)
                if ctx.graded_alongside:
                    summary.written["grades"] = summary.written.get("grades", 0) + ctx.graded_alongside
            elif stage == "grades":
                summary.written[stage] = summary.written.get(stage, 0) + st.stage_grades(ctx, grader)
            elif stage == "aggregate":
                closers = think_closers(config.models)
                rows = stage_aggregate(run, n_boot=n_boot, seed=config.interventions.seed, think_close=closers)
                summary.written[stage] = len(rows)
            elif stage == "report":
                summary.report = str(write_run_report(run, config, summary_skips(run, ctx.counts)))
            ctx.flush_skips()  # the stage's skip rows are part of its output
    finally:
        ctx.close()
        if grader is not None:
            grader.close()
    summary.skips = {f"{stage}/{reason}": count for (stage, reason), count in sorted(ctx.counts.items())}
    summary.grades = grade_verdicts(run)
    atomic_write_text(run.file(SUMMARY), json.dumps(dataclasses.asdict(summary), indent=2, sort_keys=True))
    return summary


def _models_of(config: RunConfig, stages: Sequence[str]) -> list[tuple[str, ModelConfig]]:
    """The models ``stages`` will load, with the key that names each."""
    models = []
    generates_traces = "traces" in stages and config.traces.source == "generate"
    if (
        generates_traces
        or "continuations" in stages
        or ("chains" in stages and config.interventions.between == "model")
    ):
        models += [(f"models[{i}]", m) for i, m in enumerate(config.models)]
    if "chains" in stages and config.interventions.llm is not None:
        models.append(("interventions.llm", config.interventions.llm))
    if "grades" in stages and config.grading.judge is not None:
        models.append(("grading.judge", config.grading.judge))
    return models


def summary_skips(run: RunDir, counts: Counter) -> list[dict[str, Any]]:
    """Skips over the whole run, read back from what the stages stored (the ``skips`` table and the filter's
    ``kept`` table), so a resumed run or ``recovery report RUN`` counts every one; plus this invocation's
    transient failures, which are retried rather than stored. A chain whose generation failed counts only
    while it still has no continuations."""
    stored: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    continued = None
    for row in run.table("skips").iter_rows(["id", "stage", "item", "reason"]):
        if (row["id"], row["reason"]) in seen:
            continue
        seen.add((row["id"], row["reason"]))
        if row["stage"] == "continuations" and row["reason"] == GENERATION_ERROR:
            if continued is None:
                continued = run.table("continuations").keys("chain_id")
            if row["item"] in continued:
                continue
        stored[(row["stage"], row["reason"])] += 1
    for row in run.table("kept").iter_rows(["kept", "reason"]):
        if not row["kept"]:
            stored[("filter", row["reason"])] += 1
    for key, count in counts.items():
        if key in TRANSIENT_SKIPS:
            stored[key] += count
    return [{"stage": s, "reason": r, "count": c} for (s, r), c in sorted(stored.items())]


def grade_verdicts(run: RunDir) -> dict[str, int]:
    """How many continuations got each verdict (correct, wrong, no_answer …), from the grades table, and how
    many the LLM judge disagreed on. Grades are outcomes, not skips: a ``no_answer`` was graded."""
    import pyarrow.compute as pc

    counts: Counter = Counter()
    for batch in run.table("grades").iter_batches(["verdict"]):
        for entry in pc.value_counts(batch.column(0)).to_pylist():
            counts[str(entry["values"])] += entry["counts"]
    disagreements = run.table("judge_disagreements").count()
    if disagreements:
        counts["judge_disagrees"] = disagreements
    return dict(sorted(counts.items()))


def run_report_data(run: RunDir, config: RunConfig, skips: list[dict[str, Any]] | None = None):
    """The `recovery.report.ReportData` of a run directory (aggregates, clean accuracy, skips, metadata)."""
    from recovery.report import ReportData

    meta = {
        "run_dir": str(run.path),
        "dataset": config.dataset.name,
        "models": ", ".join(m.name for m in config.models),
        "interventions": ", ".join(config.interventions.names),
        "timesteps": ", ".join(str(t) for t in config.interventions.timesteps),
        "continuations per chain (N)": config.continuation.n,
        "continuation decoding": f"T={config.continuation.temperature}, top_p={config.continuation.top_p}",
        "seed": config.interventions.seed,
        "grading": config.grading.protocol(),
        "grades by verdict": grade_verdicts(run),
    }
    from recovery.analysis import load_sections

    return ReportData.from_dicts(
        rows=read_aggregates(run),
        clean=read_clean_accuracy(run),
        skips=skips,
        meta=meta,
        sections=load_sections(run.path),
        title=config.title,
    )


def write_run_report(run: RunDir, config: RunConfig, skips: list[dict[str, Any]] | None = None) -> Path:
    """Write ``report/report.md`` and ``report/report.html`` for a run directory; returns the HTML path."""
    from recovery.report import write_report

    paths = write_report(run_report_data(run, config, skips), run.path / "report")
    return Path(paths.html)


def load_run_config_from_dir(run_dir: str | Path) -> RunConfig:
    """The config a run directory was created with (for `recovery report RUN_DIR`)."""
    from recovery.configs import from_mapping

    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {MANIFEST})")
    return from_mapping(RunConfig, json.loads(path.read_text()), where=str(path))
