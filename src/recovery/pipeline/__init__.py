"""The benchmark pipeline: problems → traces → filter → interventions → continuations → grades → report.

`run_pipeline(load_run_config(path))` runs it; each stage is resumable (see `recovery.pipeline.stages`).
"""

from recovery.model_config import ModelConfig
from recovery.pipeline import run
from recovery.pipeline.validate import load_run_config
from recovery.run_config import (
    DatasetConfig,
    FilterConfig,
    GradingConfig,
    InterventionsConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
)

# The runner (and through it every stage and the backends' glue) is imported on first use:
# worker processes import modules of this package (`chain_workers`, `grade_workers`) and should not pay for
# the rest of the pipeline at every start.
_RUN_EXPORTS = ("STAGES", "RunSummary", "run_pipeline")


def __getattr__(name: str):
    if name in _RUN_EXPORTS:
        value = getattr(run, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_RUN_EXPORTS))


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
    "run_pipeline",
]
