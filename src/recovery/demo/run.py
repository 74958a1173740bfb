"""The demo end to end: measure → build recovery traces → fine-tune → measure → compare, resumably."""

from __future__ import annotations

from pathlib import Path

from recovery.demo.config import MAX_OWN_PROBLEMS, TEACHER_SEED, TRAIN_SEED, DemoSize, demo_config, replicas
from recovery.demo.report import GRPO_RUN, SFT_RUN
from recovery.demo.results import DemoResult, Measurement, compare_demo_runs, measure
from recovery.demo.training import train_grpo, train_sft
from recovery.run_config import ModelConfig


def _clean(out: Path, size: DemoSize, seed: int, model: ModelConfig | None, progress: bool) -> tuple[float | None, int]:
    """Clean accuracy on ``size.clean_problems`` evaluation problems (original traces only) and the number
    of problems it is over; (None, 0) when the size measures none."""
    if size.clean_problems <= 0:
        return None, 0
    config = demo_config(out, seed=seed, size=size, model=model, limit=size.clean_problems)
    m = measure(config, progress=progress, stages=["problems", "traces", "filter"])
    return m.clean_accuracy, sum(int(c["n"]) for c in m.clean)


def _phases(progress: bool, total: int):
    """A function printing one header per demo phase ("[2/5] build recovery traces"), so a reader of a long
    log knows where it is; silent without progress."""
    from rich.console import Console

    console = Console(stderr=True)
    count = [0]

    def phase(title: str) -> None:
        count[0] += 1
        if progress:
            console.rule(f"[bold][{count[0]}/{total}] {title}")

    return phase


def run_demo(
    out: str | Path = "runs/demo",
    *,
    quick: bool = False,
    train: bool = True,
    grpo: bool = False,
    progress: bool = True,
    seed: int = 0,
    size: DemoSize | None = None,
) -> DemoResult:
    """Measure → build recovery traces → fine-tune → measure → compare, under ``out``. Resumable: finished
    benchmark stages are skipped on a re-run (training re-runs). Each model has its own run directory, so
    a ``grpo`` run after a plain one in the same ``out`` (or the other way round) measures only what the
    other did not."""
    out = Path(out)
    size = size or DemoSize.of(quick)
    phase = _phases(progress, (7 if grpo else 5) if train else 1)
    phase("measure the tiny reasoner")
    before = measure(demo_config(out / "before", seed=seed, size=size), progress=progress)
    clean_before, n_before = _clean(out / "before-clean", size, seed, None, progress)
    result = DemoResult(before=before, clean_before=clean_before, clean_n_before=n_before)
    if not train:
        return result
    # Training data comes from the base model on other problems: its own continuations on a few (the
    # rejection-sampled source) and a chains-only run on many (the teacher's prefixes and the clean traces).
    phase("build recovery traces")
    own = demo_config(
        out / "train-own",
        seed=seed,
        size=size,
        problems_seed=TRAIN_SEED,
        limit=min(size.own_problems, MAX_OWN_PROBLEMS),
        samples=size.own_samples,
    )
    measure(own, progress=progress)
    teach = demo_config(
        out / "train-teacher", seed=seed, size=size, problems_seed=TEACHER_SEED, limit=size.teacher_problems
    )
    measure(teach, progress=progress, stages=["problems", "traces", "filter", "chains"])
    data_runs = [Path(teach.run_dir), Path(own.run_dir)]
    phase("train (SFT)")
    model_dir = train_sft(
        out, data_runs, before.run_dir, size.sft_steps, seed, size.sft_learning_rate, size.sft_clean_fraction
    )
    result.training["sft_steps"] = size.sft_steps
    sft = _tuned(model_dir, "tiny-reasoner-recovery")
    if grpo:
        # Measured between the two trainings, so the report tells what GRPO adds beyond SFT.
        phase("measure after SFT")
        result.sft, result.clean_sft, result.clean_n_sft = _measure_model(out / SFT_RUN, size, seed, sft, progress)
        phase("train (GRPO)")
        grpo_dir, result.training["grpo_rewards"] = train_grpo(
            out, data_runs[0], before.run_dir, model_dir, size.grpo_steps, seed
        )
        result.training["grpo"] = True
        phase("measure again")
        final = _measure_model(out / GRPO_RUN, size, seed, _tuned(grpo_dir, "tiny-reasoner-recovery-grpo"), progress)
    else:
        phase("measure again")
        final = _measure_model(out / SFT_RUN, size, seed, sft, progress)
    result.after, result.clean_after, result.clean_n_after = final
    phase("compare")
    report = compare_demo_runs(out, result.training)
    result.comparison, result.grpo_comparison = report.comparison, report.grpo_comparison
    result.comparison_report = str(report.paths.html)
    result.comparison_summary = result.comparison.summary
    result.doubt_lines = report.doubt_lines
    return result


def _measure_model(
    run_dir: Path, size: DemoSize, seed: int, model: ModelConfig, progress: bool
) -> tuple[Measurement, float | None, int]:
    """A fine-tuned model's benchmark run in ``run_dir`` and its clean accuracy in ``run_dir``-clean."""
    measured = measure(demo_config(run_dir, seed=seed, size=size, model=model), progress=progress)
    clean, n = _clean(run_dir.with_name(f"{run_dir.name}-clean"), size, seed, model, progress)
    return measured, clean, n


def _tuned(model_dir: Path, name: str) -> ModelConfig:
    """The fine-tuned tiny reasoner in ``model_dir`` as a model of a benchmark run."""
    return ModelConfig(
        name=name, path=str(model_dir), spec="tiny-reasoner", batch_size=16, data_parallel_size=replicas()
    )
