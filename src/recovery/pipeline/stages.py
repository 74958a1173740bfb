"""The benchmark's stages, in run order, each registered by the module that defines it:

problems → traces → kept (filter) → chains (interventions) → continuations → grades → aggregates → report

A stage is a function of the `StageContext` that reads and writes the run directory and returns how many
rows it wrote. Every generation stage skips what is already stored (resume), commits its output in shards
of ``flush_every`` items (a kill loses at most one shard of work) and counts what it skipped, with reasons.
"""

from __future__ import annotations

from recovery.pipeline import (
    aggregate,
    chains_stage,
    continuations_stage,
    filter_stage,
    grades_stage,
    problems_stage,
    report_stage,
    traces_stage,
)
from recovery.pipeline.context import Stage

STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        problems_stage.STAGE,
        traces_stage.STAGE,
        filter_stage.STAGE,
        chains_stage.STAGE,
        continuations_stage.STAGE,
        grades_stage.STAGE,
        aggregate.STAGE,
        report_stage.STAGE,
    )
}
