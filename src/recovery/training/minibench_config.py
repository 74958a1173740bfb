"""What the mini-benchmark measures (`MiniBenchConfig`): the run config's own sections, so a mini-benchmark
and a benchmark run of the same settings are the same measurement."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from recovery.doubt import DEFAULT_FIRST_SENTENCES
from recovery.run_config import DatasetConfig, GradingConfig, InterventionsConfig, SamplingConfig

#: The toy interventions measured by default: one per category that moves the tiny reasoner most.
DEFAULT_TOY_INTERVENTIONS: tuple[str, ...] = (
    "toy/wrong_continuation",
    "toy/random_characters",
    "toy/unrelated_cot",
)
DEFAULT_TIMESTEPS: tuple[float, ...] = (0.3, 0.5, 0.7)
SOURCES = ("toy", "run")


def toy_sampling() -> SamplingConfig:
    """The decoding of toy and custom chains when ``continuation`` is not given."""
    return SamplingConfig(n=4, temperature=0.6, top_p=0.95, max_new_tokens=320, seed=0)


@dataclass
class MiniBenchConfig:
    """What the mini-benchmark measures (see module doc).

    Its settings are the run config's own sections (`recovery.run_config`), under the same names and with
    the same validation, so a mini-benchmark and a benchmark run of the same settings are the same
    measurement: ``interventions`` (`InterventionsConfig`: ``names``, ``timesteps``, ``seed`` of the chains,
    ``min_steps``, ``wikipedia_pool``), ``continuation`` (`SamplingConfig`: ``n`` continuations per chain,
    majority = ⌊N/2⌋+1, ``temperature``, ``top_p``, ``max_new_tokens``, ``seed`` of every request) and
    ``grading`` (`GradingConfig`: ``workers``, ``timeout_s``, ``unclosed``; no judge inside a training
    loop). ``prompt_template`` is the run config's ``dataset.prompt_template`` (the user turn).

    ``interventions`` None: the toy defaults for ``source="toy"`` or custom items, every one the run holds
    for ``source="run"``; ``continuation`` None: `toy_sampling` (4 samples of at most 320 tokens), the run's
    own for ``source="run"`` (`MiniBench.config` holds it resolved); ``grading`` None: the run's ``unclosed`` policy for ``source="run"`` (so the curve
    logged during training grades as the run did), else the defaults, each with one grading worker.
    ``models`` restricts a run's chains to those models (the one being trained). ``include_clean`` also
    samples ``continuation.n`` whole responses per problem for clean accuracy. ``spec`` names the model
    conventions (`recovery.models.get_spec`); None: guessed from the model.
    """

    source: str = "toy"
    run_dir: str | None = None
    models: list[str] | None = None
    n_problems: int = 8
    interventions: InterventionsConfig | None = None
    continuation: SamplingConfig | None = None
    grading: GradingConfig | None = None
    prompt_template: str | None = None
    include_clean: bool = True
    spec: str | None = None
    max_batch_rows: int = 64
    doubt_sentences: int = DEFAULT_FIRST_SENTENCES
    n_boot: int = 200

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "run" and not self.run_dir:
            raise ValueError("source='run' needs run_dir (a benchmark run directory)")
        if self.n_problems < 1:
            raise ValueError(f"n_problems must be ≥ 1, got {self.n_problems}")
        DatasetConfig(name="mini-benchmark", prompt_template=self.prompt_template)  # the run config's check
        iv = self.interventions
        if iv is not None and (iv.llm is not None or iv.append_wait or iv.repeats != 1):
            raise ValueError(
                "interventions: the mini-benchmark intervenes once with rule-based or toy interventions "
                "(no intervention LLM, append_wait or repeats inside a training loop)"
            )
        if self.grading is not None and self.grading.judge is not None:
            raise ValueError("grading.judge: the mini-benchmark grades with the rule-based grader only")


def logged_settings(config: MiniBenchConfig, grading: GradingConfig, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """``config``'s settings as W&B config keys: plain fields by name (but ``skip``), the run config sections
    under dotted names (``continuation.n``, ``grading.unclosed`` — ``grading`` as the benchmark grades, the
    run's when it follows a run; no judge inside a training loop), the chains' seed and minimum steps."""
    sections = ("interventions", "continuation", "grading")
    settings = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in skip and f.name not in sections
    }
    for key, value in dataclasses.asdict(config.continuation).items():
        settings[f"continuation.{key}"] = value
    for key in ("workers", "timeout_s", "unclosed"):
        settings[f"grading.{key}"] = getattr(grading, key)
    if config.interventions is not None:
        settings["interventions.seed"] = config.interventions.seed
        settings["interventions.min_steps"] = config.interventions.min_steps
    return settings
