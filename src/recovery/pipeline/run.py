"""Run the benchmark's stages in order, resumably, and summarise what was done and skipped."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.backends.registry import check_loadable, local_weights
from recovery.backends.registry import make_generator as default_factory
from recovery.backends.settings import own_settings
from recovery.configs import ConfigError, to_mapping
from recovery.pipeline.context import StageContext
from recovery.pipeline.grader_version import bring_grades_up_to_date
from recovery.pipeline.outcome import NothingMeasured, note_outcome
from recovery.pipeline.ray_replicas import RaySession
from recovery.pipeline.servers import probe_servers
from recovery.pipeline.stages import STAGES
from recovery.pipeline.validate import check_run_config
from recovery.plan import plan_for, protocol_label, resolved_config
from recovery.run_config import ModelConfig, RunConfig
from recovery.run_dir import (
    Run,
    grade_verdicts,
    is_run_dir,
    open_run,
    write_manifest,
    write_summary,
)
from recovery.run_dir.files import check_side_files
from recovery.run_dir.lock import exclusive_writer
from recovery.run_dir.readers import refuse_duplicated_ids
from recovery.run_dir.servers import check_servers
from recovery.run_dir.state import mark_finished, mark_writing
from recovery.run_dir.weights import check_weights

# Keys that may change between a run and its resumption without changing any result.
_RESUMABLE_KEYS = {"flush_every", "title", "wandb", "run_dir", "cpu_workers", "executor"}
_RESUMABLE_GRADING_KEYS = {"workers", "alongside"}
# Stages that add no rows: an invocation running only these leaves the run's progress as it was.
_ADD_NO_ROWS = {"aggregate", "report"}


@dataclass
class RunSummary:
    """What one invocation did: rows written per stage and skips per (stage, reason)."""

    run_dir: str
    written: dict[str, int] = field(default_factory=dict)
    skips: dict[str, int] = field(default_factory=dict)
    grades: dict[str, int] = field(default_factory=dict)  # the run's continuations by verdict (see grade_verdicts)
    report: str | None = None
    # Why the run measured nothing (None: it measured something; see `recovery.pipeline.outcome`).
    outcome: str | None = None
    # Every distinct reason a backend gave for a failed request: stage, reason (verbatim), count, of (sent).
    failed_requests: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what was not measured, in a run that measured something

    def skip_rows(self) -> list[dict[str, Any]]:
        return [
            {"stage": k.split("/")[0], "reason": k.split("/", 1)[1], "count": v} for k, v in sorted(self.skips.items())
        ]


def _results_part(mapping: dict[str, Any]) -> dict[str, Any]:
    """The part of a config mapping that can change a run's results (throughput, workers and where a
    server is reached are left out, so changing them never makes a run directory unresumable)."""

    def model(m: Any) -> Any:
        # Each backend's settings declare whether they change results (`recovery.backends.settings`).
        return own_settings(m, results_only=True)

    out = {k: v for k, v in mapping.items() if k not in _RESUMABLE_KEYS}
    out["models"] = [model(m) for m in out.get("models", [])]
    if isinstance(out.get("interventions"), dict):
        out["interventions"] = {**out["interventions"], "llm": model(out["interventions"].get("llm"))}
    if isinstance(out.get("grading"), dict):
        grading = {k: v for k, v in out["grading"].items() if k not in _RESUMABLE_GRADING_KEYS}
        out["grading"] = {**grading, "judge": model(grading.get("judge"))}
    return out


def check_resumable(config: RunConfig) -> None:
    """Raise `ConfigError` when ``config.run_dir`` holds a run created with a config that would change its
    results; a directory with no run passes. Writes nothing, so a caller about to start several runs can
    check them all before any work."""
    if not is_run_dir(config.run_dir):
        return
    current = _results_part(to_mapping(resolved_config(config)))
    # The stored config is read back through the dataclasses, so fields added since the run was created
    # compare at their defaults instead of looking like a change; both sides resolved (`recovery.plan`).
    stored = _results_part(to_mapping(resolved_config(open_run(config.run_dir).config)))
    if stored != current:
        changed = sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))
        raise ConfigError(
            f"{config.run_dir} was created with a different config (changed: {', '.join(changed)}); "
            "use a new run_dir or restore the original config to resume"
        )


def _check_manifest(run: Run, config: RunConfig) -> None:
    """Refuse to resume a run directory with a config that would change its results; record the config
    of a new one."""
    check_resumable(config)
    if not is_run_dir(run.path):
        write_manifest(run, config)


def run_pipeline(
    config: RunConfig,
    *,
    stages: Sequence[str] = tuple(STAGES),
    make_generator: Callable[[ModelConfig], Any] | None = None,
    progress: bool = True,
    n_boot: int = 2000,
) -> RunSummary:
    """Run ``stages`` (default: all) of the benchmark described by ``config``.

    Safe to re-run at any time: finished records are skipped, so a killed run resumes where it stopped.
    Raises `NothingMeasured` (after writing the summary and, if asked, the report) when a stage's every
    backend request failed or the filter kept no trace; the stages after that one are not run.
    ``make_generator`` builds a backend for a `ModelConfig` (default: `recovery.backends.registry`).
    """
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; stages are {', '.join(STAGES)}")
    config = resolved_config(config)  # what the manifest records, and every stage reads (`recovery.plan`)
    check_run_config(config, stages=stages)  # before any work: a value the run cannot honour fails here
    check_side_files(config.run_dir)  # and a folder where one of the run directory's files must be
    servers: dict[str, dict[str, Any]] = {}
    if make_generator is None:  # the default backends load models: one that cannot be found fails here too
        for where, model in _models_of(config, stages):
            check_loadable(model, where=where)
        servers = probe_servers(config, _models_of(config, stages))  # what each model's server accepts
    if make_generator is None:  # the run's seed and servers bound in a partial: it pickles, for Ray's replicas
        make_generator = functools.partial(default_factory, seed=config.continuation.seed, servers=servers)
    session = None
    if config.executor.kind == "ray" and _models_of(config, stages):
        # Connected before any work (a cluster that cannot be reached fails here); every backend of the
        # run is then a pool of replicas on the cluster.
        session = RaySession(config.executor, make_generator)
        make_generator = session.generator
    try:
        # One writer per run directory from its first write on: a second process fails here, before any work,
        # while checks that write nothing (models, servers, the cluster) leave no directory behind.
        with exclusive_writer(config.run_dir):
            return _run_stages(config, stages, make_generator, servers, progress, n_boot)
    finally:
        if session is not None:
            session.close()


def _run_stages(
    config: RunConfig,
    stages: Sequence[str],
    make_generator: Callable[[ModelConfig], Any],
    servers: dict[str, dict[str, Any]],
    progress: bool,
    n_boot: int,
) -> RunSummary:
    """`run_pipeline`'s writing part, under the run directory's lock: check the manifest, the weights, the
    servers and the tables, run the stages, write the summary."""
    run = open_run(config.run_dir)
    _check_manifest(run, config)
    # The same config can name other weights than the run measured (a checkpoint retrained in place).
    check_weights(run, {model.name: local_weights(model) for model in config.models})
    urls = {m.name: getattr(m.settings, "base_url", None) or "" for _, m in _models_of(config, stages)}
    check_servers(run, servers, urls)
    refuse_duplicated_ids(run)
    run.clean_stale()
    if {"continuations", "grades"} & set(stages):  # the stages that write grades write the current grader's
        regrading = bring_grades_up_to_date(run)
        if regrading and progress:
            print(regrading, file=sys.stderr)
    adds_rows = not set(stages) <= _ADD_NO_ROWS
    if adds_rows:
        mark_writing(run)  # until this invocation ends: analyses and exports refuse the run, or call theirs partial
    ctx = StageContext(config=config, run=run, make_generator=make_generator, progress=progress, n_boot=n_boot)
    try:
        for stage in (spec for name, spec in STAGES.items() if name in stages):
            if ctx.outcome is not None and stage.name != "report":
                continue  # an earlier stage measured nothing: the report still says why
            written = stage.run(ctx)
            if written is not None:
                ctx.written[stage.name] += written
            ctx.flush_skips()  # the stage's skip rows are part of its output
            note_outcome(ctx, stage.name)
    finally:
        ctx.close()
    written = {name: ctx.written[name] for name in STAGES if name in ctx.written}  # in run order
    summary = RunSummary(run_dir=str(run.path), written=written, report=ctx.report)
    summary.skips = {f"{stage}/{reason}": count for (stage, reason), count in sorted(ctx.counts.items())}
    summary.grades = grade_verdicts(run)
    summary.outcome, summary.warnings, summary.failed_requests = ctx.outcome, ctx.warnings, ctx.requests.rows()
    written_summary = dataclasses.asdict(summary)
    if config.protocol != "default" or config.protocol_parts:  # a default run's summary keeps its keys
        written_summary["protocol"] = protocol_label(config.protocol, config.protocol_parts)
    write_summary(run, written_summary)
    if adds_rows:  # a run killed before here stays unfinished; an invocation adding nothing leaves it as it was
        mark_finished(run)
    if summary.outcome is not None:  # written first: what it did (and why nothing) stays on disk
        raise NothingMeasured(summary.outcome, summary)
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
    # The judge grades the continuations, and under the authors' selection the original traces too.
    judges_traces = plan_for(config).selection.judge_grades_traces
    judge_filters = "filter" in stages and judges_traces and config.traces.source != "run"
    if ("grades" in stages or judge_filters) and config.grading.judge is not None:
        models.append(("grading.judge", config.grading.judge))
    return models
