"""The embedded default, end to end on a CPU with no downloads: measure the tiny reasoner's robustness on
held-out toy problems, build SFT recovery traces from its own continuations and from the toy teacher on
separate training problems, fine-tune it with TRL (GRPO optionally), measure again, and compare.

Everything goes through the same code users run on real models: `run_pipeline`, the training-data
builders, `recovery.training.sft`/`grpo` and the comparison report.

- `recovery.demo.config`: the toy interventions, the problem seeds, the sizes, one run's `RunConfig`.
- `recovery.demo.results`: headline numbers of a run, the before/after table, the comparison report.
- `recovery.demo.training`: SFT (and optionally GRPO) of the tiny reasoner.
- `recovery.demo.run`: `run_demo`, the whole loop.
"""

from recovery.demo.config import (
    EVAL_SEED,
    TEACHER_SEED,
    TOY_INTERVENTIONS,
    TRAIN_SEED,
    DemoSize,
    GRPOSize,
    demo_config,
)
from recovery.demo.results import DemoResult, Measurement, compare_demo_runs, measure
from recovery.demo.run import run_demo

__all__ = [
    "EVAL_SEED",
    "TEACHER_SEED",
    "TOY_INTERVENTIONS",
    "TRAIN_SEED",
    "DemoResult",
    "DemoSize",
    "GRPOSize",
    "Measurement",
    "compare_demo_runs",
    "demo_config",
    "measure",
    "run_demo",
]
