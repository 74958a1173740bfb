"""The benchmark pipeline: problems → traces → filter → interventions → continuations → grades → report.

`run_pipeline(load_run_config(path))` runs it; each stage is resumable (see `recovery.pipeline.stages`).
"""

from recovery.pipeline.config import (
    DatasetConfig,
    FilterConfig,
    GradingConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
    load_run_config,
)
from recovery.pipeline.run import STAGES, RunSummary, load_run_config_from_dir, run_pipeline, write_run_report

__all__ = [
    "STAGES",
    "DatasetConfig",
    "FilterConfig",
    "GradingConfig",
    "InterventionsConfig",
    "ModelConfig",
    "RunConfig",
    "RunSummary",
    "SamplingConfig",
    "TracesConfig",
    "load_run_config",
    "load_run_config_from_dir",
    "run_pipeline",
    "write_run_report",
]
