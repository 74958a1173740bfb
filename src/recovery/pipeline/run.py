"""Run the benchmark's stages in order, resumably, and summarise what was done and skipped."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery.backends.registry import check_loadable, local_weights
from recovery.backends.registry import make_generator as default_factory
from recovery.library_bars import library_bars_off
from recovery.model_config import ModelConfig
from recovery.pipeline.context import StageContext
from recovery.pipeline.grader_version import bring_grades_up_to_date
from recovery.pipeline.outcome import NothingMeasured, note_outcome
from recovery.pipeline.ray_replicas import RaySession
from recovery.pipeline.servers import probe_servers
from recovery.pipeline.stages import STAGES
from recovery.pipeline.validate import check_run_config
from recovery.plan import RunPlan, plan_for, protocol_label
from recovery.run_config import RunConfig
from recovery.run_dir import Run, grade_verdicts
from recovery.run_dir.files import check_side_files
from recovery.run_dir.readers import refuse_duplicated_ids
from recovery.run_dir.servers import check_servers
from recovery.run_dir.weights import check_weights
from recovery.run_dir.writing import writing

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
    ``progress=False`` shows no progress bar, neither the run's nor the libraries' own (`library_bars_off`).
    """
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; stages are {', '.join(STAGES)}")
    plan = plan_for(config)  # built once; its config (grading resolved) is what the manifest records and stages read
    config = plan.config
    check_run_config(config, stages=stages)  # before any work: a value the run cannot honour fails here
    check_side_files(config.run_dir)  # and a folder where one of the run directory's files must be
    servers: dict[str, dict[str, Any]] = {}
    models = _models_of(plan, stages)
    if make_generator is None:  # the default backends load models: one that cannot be found fails here too
        for where, model in models:
            check_loadable(model, where=where)
        servers = probe_servers(config, models)  # what each model's server accepts
    if make_generator is None:  # the run's seed and servers bound in a partial: it pickles, for Ray's replicas
        make_generator = functools.partial(default_factory, seed=config.continuation.seed, servers=servers)
    session = None
    if config.executor.kind == "ray" and models:
        # Connected before any work (a cluster that cannot be reached fails here); every backend of the
        # run is then a pool of replicas on the cluster.
        session = RaySession(config.executor, make_generator)
        make_generator = session.generator
    try:
        # One writer per run directory from its first write on: a second process fails there, before any work,
        # while checks that write nothing (models, servers, the cluster) leave no directory behind.
        with contextlib.nullcontext() if progress else library_bars_off():  # the libraries' bars too
            return _run_stages(plan, stages, models, make_generator, servers, progress, n_boot)
    finally:
        if session is not None:
            session.close()


def _run_stages(
    plan: RunPlan,
    stages: Sequence[str],
    models: list[tuple[str, ModelConfig]],
    make_generator: Callable[[ModelConfig], Any],
    servers: dict[str, dict[str, Any]],
    progress: bool,
    n_boot: int,
) -> RunSummary:
    """`run_pipeline`'s writing part, through the run directory's door (`recovery.run_dir.writing`): the
    weights, servers and tables checked, the stages run, the summary left. ``models``: what ``stages`` load
    (`_models_of`)."""
    config = plan.config
    urls = {m.name: getattr(m.settings, "base_url", None) or "" for _, m in models}

    def checks(run: Run) -> None:
        # The same config can name other weights than the run measured (a checkpoint retrained in place).
        check_weights(run, {model.name: local_weights(model) for model in config.models})
        check_servers(run, servers, urls)
        refuse_duplicated_ids(run)

    with writing(config, adds_rows=not set(stages) <= _ADD_NO_ROWS, checks=checks) as door:
        run = door.run
        if {"continuations", "grades"} & set(stages):  # the stages that write grades write the current grader's
            regrading = bring_grades_up_to_date(run)
            if regrading and progress:
                print(regrading, file=sys.stderr)
        ctx = StageContext(plan=plan, run=run, make_generator=make_generator, progress=progress, n_boot=n_boot)
        try:
            for stage in (spec for name, spec in STAGES.items() if name in stages):
                if ctx.outcome is not None and stage.name != "report":
                    continue  # an earlier stage measured nothing: the report still says why
                written = stage.run(ctx)
                if written is not None:
                    ctx.written[stage.name] += written
                ctx.log.flush()  # the stage's skip rows are part of its output
                note_outcome(ctx, stage.name)
        finally:
            ctx.close()
        written = {name: ctx.written[name] for name in STAGES if name in ctx.written}  # in run order
        summary = RunSummary(run_dir=str(run.path), written=written, report=ctx.report)
        summary.skips = {f"{stage}/{reason}": count for (stage, reason), count in sorted(ctx.log.counts.items())}
        summary.grades = grade_verdicts(run)
        summary.outcome, summary.warnings, summary.failed_requests = ctx.outcome, ctx.warnings, ctx.log.requests.rows()
        door.summary = dataclasses.asdict(summary)
        if not config.default_protocol:  # a default run's summary keeps its keys
            door.summary["protocol"] = protocol_label(config.protocol, config.protocol_parts)
    if summary.outcome is not None:  # written first: what it did (and why nothing) stays on disk
        raise NothingMeasured(summary.outcome, summary)
    return summary


def _models_of(plan: RunPlan, stages: Sequence[str]) -> list[tuple[str, ModelConfig]]:
    """The models ``stages`` will load, with the key that names each."""
    config = plan.config
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
    judges_traces = plan.selection.judge_grades_traces
    judge_filters = "filter" in stages and judges_traces and config.traces.source != "run"
    if ("grades" in stages or judge_filters) and config.grading.judge is not None:
        models.append(("grading.judge", config.grading.judge))
    return models
