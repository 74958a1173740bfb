"""The demo end to end: measure → build recovery traces → fine-tune → measure → compare, resumably."""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass, fields
from pathlib import Path

from recovery.configs import ConfigError
from recovery.demo.config import MAX_OWN_PROBLEMS, TEACHER_SEED, TRAIN_SEED, DemoSize, demo_config, replicas
from recovery.demo.report import CHOICE_BASE_RUN, CHOICE_SFT_RUN, GRPO_LOG, GRPO_ONLY_RUN, GRPO_RUN, SFT_RUN
from recovery.demo.results import DemoResult, Measurement, compare_demo_runs, measure
from recovery.demo.training import (
    GRPO_MODEL,
    GRPO_ONLY_MODEL,
    SFT_MODEL,
    GRPOStage,
    reward_means,
    train_grpo,
    train_sft,
)
from recovery.model_config import ModelConfig
from recovery.run_config import RunConfig
from recovery.run_dir.writing import check_resumable
from recovery.store import atomic_write_text

TIMINGS_FILE = "timings.json"  # under the demo's directory: seconds per phase and per training


@dataclass(frozen=True)
class DemoPlan:
    """Every benchmark run the demo will make, built before any work: a run directory there that cannot be
    resumed with its config (left by another size, or by a demo directory that was moved, so its models'
    paths changed) then fails at once instead of after the training before it. ``*_clean`` runs measure
    clean accuracy on more problems (None when the size measures none); the trained models' runs are None
    when the demo does not train them."""

    before: RunConfig
    before_clean: RunConfig | None
    own: RunConfig | None = None
    teacher: RunConfig | None = None
    sft: RunConfig | None = None
    sft_clean: RunConfig | None = None
    choice: RunConfig | None = None  # the model GRPO starts from, on training problems: which prompts disagree
    grpo: RunConfig | None = None
    grpo_clean: RunConfig | None = None

    def configs(self) -> list[RunConfig]:
        return [c for c in (getattr(self, f.name) for f in fields(self)) if c is not None]


def plan_demo(out: Path, size: DemoSize, seed: int, *, train: bool, grpo: bool, grpo_only: bool = False) -> DemoPlan:
    """The demo's runs under ``out``: the base model's, the training data's and each trained model's. With
    ``grpo_only`` the base model is trained by GRPO alone (no SFT, no recovery traces)."""

    def runs(name: str, model: ModelConfig | None) -> tuple[RunConfig, RunConfig | None]:
        clean = None
        if size.clean_problems > 0:
            clean = demo_config(out / f"{name}-clean", seed=seed, size=size, model=model, limit=size.clean_problems)
        return demo_config(out / name, seed=seed, size=size, model=model), clean

    def choice(name: str, model: ModelConfig | None) -> RunConfig:
        # The starting model on training problems, N continuations per chain: its per-chain share of correct
        # continuations says which prompts' groups will disagree (`GRPOSize`).
        return demo_config(
            out / name,
            seed=seed,
            size=size,
            model=model,
            problems_seed=TRAIN_SEED,
            limit=size.grpo.choice_problems,
            samples=size.grpo.choice_samples,
        )

    before = runs("before", None)
    if not train:
        return DemoPlan(*before)
    if grpo_only:
        only, only_clean = runs(GRPO_ONLY_RUN, tuned_model(out / GRPO_ONLY_MODEL, "tiny-reasoner-grpo", size))
        return DemoPlan(*before, choice=choice(CHOICE_BASE_RUN, None), grpo=only, grpo_clean=only_clean)
    # Training data comes from the base model on other problems: its own continuations on a few (the
    # rejection-sampled source) and a chains-only run on many (the teacher's prefixes and the clean traces).
    own = demo_config(
        out / "train-own",
        seed=seed,
        size=size,
        problems_seed=TRAIN_SEED,
        limit=min(size.own_problems, MAX_OWN_PROBLEMS),
        samples=size.own_samples,
    )
    teacher = demo_config(
        out / "train-teacher", seed=seed, size=size, problems_seed=TEACHER_SEED, limit=size.teacher_problems
    )
    sft_model = tuned_model(out / SFT_MODEL, "tiny-reasoner-recovery", size)
    sft = runs(SFT_RUN, sft_model)
    if not grpo:
        return DemoPlan(*before, own, teacher, *sft)
    trained = runs(GRPO_RUN, tuned_model(out / GRPO_MODEL, "tiny-reasoner-recovery-grpo", size))
    return DemoPlan(*before, own, teacher, *sft, choice(CHOICE_SFT_RUN, sft_model), *trained)


def _clean(config: RunConfig | None, progress: bool) -> tuple[float | None, int]:
    """Clean accuracy of a clean-only run (original traces only) and the number of problems it is over;
    (None, 0) without one."""
    if config is None:
        return None, 0
    m = measure(config, progress=progress, stages=["problems", "traces", "filter"])
    return m.clean_accuracy, sum(int(c["n"]) for c in m.clean)


class _Phases:
    """Prints one header per demo phase ("[2/5] build recovery traces"), so a reader of a long log knows
    where it is (silent without progress), and records each phase's wall seconds for `DemoResult.seconds`."""

    def __init__(self, progress: bool, total: int) -> None:
        from rich.console import Console

        self.console, self.progress, self.total = Console(stderr=True), progress, total
        self.seconds: dict[str, float] = {}
        self._current: tuple[str, float] | None = None

    def __call__(self, title: str) -> None:
        self.end()
        if self.progress:
            self.console.rule(f"[bold][{len(self.seconds) + 1}/{self.total}] {title}")
        self._current = (title, time.perf_counter())

    def end(self) -> dict[str, float]:
        """Close the current phase; returns the seconds of every phase so far, in order."""
        if self._current is not None:
            title, start = self._current
            self.seconds[title] = time.perf_counter() - start
            self._current = None
        return self.seconds


def run_demo(
    out: str | Path = "runs/demo",
    *,
    quick: bool = False,
    train: bool = True,
    grpo: bool = False,
    grpo_only: bool = False,
    progress: bool = True,
    seed: int = 0,
    size: DemoSize | None = None,
    train_seed: int | None = None,
    wandb: bool = False,
) -> DemoResult:
    """Measure → build recovery traces → fine-tune → measure → compare, under ``out``. Resumable: finished
    benchmark stages are skipped on a re-run (training re-runs). Each model has its own run directory, so
    a ``grpo`` run after a plain one in the same ``out`` (or the other way round) measures only what the
    other did not. ``grpo`` adds GRPO after SFT; ``grpo_only`` trains the base model with GRPO alone (no
    recovery traces, no teacher). ``seed`` fixes the problems, interventions and sampling; ``train_seed``
    (default: ``seed``) only the training's data order and initialisation, so several training seeds measure
    the spread of one benchmark's training (``bench/demo_spread.py``). ``wandb``: the GRPO stage reports its
    curves to W&B."""
    if grpo and grpo_only:
        raise ConfigError("recovery demo: --grpo (GRPO after SFT) and --grpo-only (GRPO alone) exclude each other")
    if grpo_only and not train:
        raise ConfigError("recovery demo: --grpo-only trains; it cannot go with --no-train")
    if wandb and not (grpo or grpo_only):
        raise ConfigError("recovery demo: --wandb reports the GRPO stage; give --grpo or --grpo-only")
    if wandb and importlib.util.find_spec("wandb") is None:
        raise ConfigError("recovery demo: --wandb needs the wandb package (pip install 'recovery[wandb]')")
    out = Path(out)
    size = size or DemoSize.of(quick)
    plan = plan_demo(out, size, seed, train=train, grpo=grpo, grpo_only=grpo_only)
    for config in plan.configs():
        check_resumable(config)
    phase = _Phases(progress, (8 if grpo else 5) if train else 1)
    phase("measure the tiny reasoner")
    before = measure(plan.before, progress=progress)
    clean_before, n_before = _clean(plan.before_clean, progress)
    result = DemoResult(before=before, clean_before=clean_before, clean_n_before=n_before, seconds=phase.seconds)
    if not train:
        return _timed(out, result, phase)
    train_seed = seed if train_seed is None else train_seed
    if grpo_only:
        final = _train_grpo(
            out, plan, before.run_dir, "tiny-reasoner", GRPO_ONLY_MODEL, size, train_seed, result, phase, wandb
        )
        result.training["grpo_only"] = True
        return _finish(out, result, final, phase)
    phase("build recovery traces")
    measure(plan.own, progress=progress)
    measure(plan.teacher, progress=progress, stages=["problems", "traces", "filter", "chains"])
    data_runs = [Path(plan.teacher.run_dir), Path(plan.own.run_dir)]
    phase("train (SFT)")
    model_dir, result.train_runtime["sft"] = train_sft(
        out, data_runs, before.run_dir, size.sft_steps, train_seed, size.sft_learning_rate, size.sft_clean_fraction
    )
    result.training["sft_steps"] = size.sft_steps
    if grpo:
        # Measured between the two trainings, so the report tells what GRPO adds beyond SFT.
        phase("measure after SFT")
        result.sft, result.clean_sft, result.clean_n_sft = _measure_model(plan.sft, plan.sft_clean, progress)
        final = _train_grpo(out, plan, before.run_dir, model_dir, GRPO_MODEL, size, train_seed, result, phase, wandb)
        result.training["grpo"] = True
    else:
        phase("measure again")
        final = _measure_model(plan.sft, plan.sft_clean, progress)
    return _finish(out, result, final, phase)


def _train_grpo(
    out: Path,
    plan: DemoPlan,
    eval_run: Path,
    start: Path | str,
    model: str,
    size: DemoSize,
    train_seed: int,
    result: DemoResult,
    phase: _Phases,
    wandb: bool,
) -> tuple[Measurement, float | None, int]:
    """Choose the prompts on-policy (``plan.choice``), train GRPO from ``start`` into ``out/model``, keep its log
    history beside the model (``out/model/GRPO_LOG``: the report's curves) and measure the trained model."""
    progress = phase.progress
    phase("choose GRPO prompts")
    measure(plan.choice, progress=progress)
    phase("train (GRPO)")
    stage = GRPOStage(
        out, Path(plan.choice.run_dir), eval_run, start, size.grpo, train_seed, model, size.timesteps, wandb
    )
    _, history, result.train_runtime["grpo"] = train_grpo(stage)
    atomic_write_text(out / model / GRPO_LOG, json.dumps(history, indent=1))
    result.training["grpo_steps"] = size.grpo.steps
    result.training["grpo_rewards"] = reward_means(history)
    phase("measure again")
    return _measure_model(plan.grpo, plan.grpo_clean, progress)


def _finish(out: Path, result: DemoResult, final: tuple[Measurement, float | None, int], phase: _Phases) -> DemoResult:
    """Record the final model's measurement, compare the runs and write the report."""
    result.after, result.clean_after, result.clean_n_after = final
    phase("compare")
    report = compare_demo_runs(out, result.training)
    result.comparison, result.grpo_comparison = report.comparison, report.grpo_comparison
    result.comparison_report = str(report.paths.html)
    result.comparison_summary = result.comparison.summary
    result.doubt_lines = report.doubt_lines
    return _timed(out, result, phase)


def _timed(out: Path, result: DemoResult, phases: _Phases) -> DemoResult:
    """Close the last phase and write the demo's timings to ``out/timings.json`` (`bench/demo_time.py`
    reads them): each phase's wall seconds and each training's ``train_runtime``."""
    phases.end()
    timings = {"phases": result.seconds, "train_runtime": result.train_runtime}
    atomic_write_text(out / TIMINGS_FILE, json.dumps(timings, indent=2))
    return result


def _measure_model(config: RunConfig, clean: RunConfig | None, progress: bool) -> tuple[Measurement, float | None, int]:
    """A trained model's benchmark run and its clean accuracy."""
    return (measure(config, progress=progress), *_clean(clean, progress))


def tuned_model(model_dir: Path, name: str, size: DemoSize) -> ModelConfig:
    """The fine-tuned tiny reasoner in ``model_dir`` as a model of a benchmark run."""
    return ModelConfig(
        name=name,
        path=str(model_dir),
        spec="tiny-reasoner",
        settings={"batch_size": 16, "data_parallel_size": replicas(size)},
    )
