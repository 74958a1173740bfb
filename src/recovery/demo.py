"""The embedded default, end to end on a CPU with no downloads: measure the tiny reasoner's robustness on
held-out toy problems, build SFT recovery traces from its own continuations and from the toy teacher on
separate training problems, fine-tune it with TRL (GRPO optionally), measure again, and compare.

Everything goes through the same code users run on real models: `run_pipeline`, the training-data
builders, `recovery.training.sft`/`grpo` and the comparison report.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable

from recovery.pipeline import (
    DatasetConfig,
    InterventionsConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    TracesConfig,
    run_pipeline,
)
from recovery.run_dir import is_run_dir, read_aggregates, read_clean_accuracy

TOY_INTERVENTIONS = (
    "toy/complete_step",
    "toy/paraphrase",
    "toy/random_characters",
    "toy/wikipedia_text",
    "toy/wrong_continuation",
    "toy/hallucinated_fact",
    "toy/unrelated_cot",
)
# The tiny reasoner's traces are ~100 tokens; 320 new tokens leave room for a long recovery.
TOY_MAX_NEW_TOKENS = 320
# Toy item idx of seed s is Random(s + idx); the tiny reasoner trained on seeds 0..25,599 and holds out
# 1000 items of seed 1,000,000 (recovery.toy.dataset.HELDOUT_SEED). Evaluation takes held-out items 0..,
# the own-continuation training run held-out items 500.., and the teacher run fresh problems from seed
# 2,000,000 on (as many as it likes): the three sets are disjoint, so the demo never trains on what it
# measures.
EVAL_SEED = 1_000_000
TRAIN_SEED = EVAL_SEED + 500
TEACHER_SEED = 2_000_000
MAX_OWN_PROBLEMS = 500


@dataclass(frozen=True)
class DemoSize:
    """How much the demo measures and trains.

    Generation dominates the time on a CPU, so the model's own continuations (rejection sampling) come from
    a small run, while the toy teacher — which writes recoveries without generating — works on the chains
    of a larger chains-only run (its traces are also the clean examples mixed in).
    """

    eval_problems: int
    own_problems: int
    teacher_problems: int
    timesteps: tuple[float, ...]
    samples: int
    own_samples: int
    sft_steps: int
    grpo_steps: int = 0  # with --grpo: a short GRPO stage after SFT
    sft_learning_rate: float = 3.0e-4
    # Share of clean traces in the SFT mix. Measured on the full demo's data: 0.5 cost 7.5 points of clean
    # accuracy (99.0 → 91.5 % on 200 problems); 0.75 kept it within one point (98.0 %), with smaller
    # robustness gains.
    sft_clean_fraction: float = 0.75
    # Clean accuracy on this many problems (original traces only, ~20 problems/s): the robustness run's
    # dozen problems are too few to tell a 2-point change.
    clean_problems: int = 0

    @classmethod
    def of(cls, quick: bool) -> DemoSize:
        if quick:
            return cls(
                eval_problems=12,
                own_problems=24,
                teacher_problems=400,
                timesteps=(0.3, 0.5, 0.7),
                samples=4,
                own_samples=2,
                sft_steps=150,
                grpo_steps=10,
                clean_problems=100,
            )
        # Sized for about 10 minutes on a 2-core CPU (the README gives the measured time).
        return cls(
            eval_problems=16,
            own_problems=16,
            teacher_problems=600,
            timesteps=(0.1, 0.3, 0.5, 0.7, 0.9),
            samples=8,
            own_samples=2,
            sft_steps=300,
            grpo_steps=30,
            clean_problems=200,
        )


def replicas() -> int:
    """Tiny-model replicas for generation: one per CPU (up to 4); each decodes on one thread."""
    from recovery.parallel import available_cpus

    return max(1, min(available_cpus(), 4))


def demo_config(
    out: str | Path,
    *,
    quick: bool = False,
    seed: int = 0,
    model: ModelConfig | None = None,
    problems_seed: int = EVAL_SEED,
    limit: int | None = None,
    samples: int | None = None,
    size: DemoSize | None = None,
) -> RunConfig:
    """A toy benchmark run: the paper's protocol (Table 15 decoding, five timesteps) at toy scale."""
    size = size or DemoSize.of(quick)
    return RunConfig(
        run_dir=str(out),
        title="recovery demo: tiny reasoner on the toy world",
        dataset=DatasetConfig(name="toy", limit=limit or size.eval_problems, options={"seed": problems_seed + seed}),
        models=[model or ModelConfig(name="tiny-reasoner", batch_size=16, data_parallel_size=replicas())],
        traces=TracesConfig(
            sampling=SamplingConfig(n=1, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed)
        ),
        interventions=InterventionsConfig(names=list(TOY_INTERVENTIONS), timesteps=list(size.timesteps), seed=seed),
        continuation=SamplingConfig(
            n=samples or size.samples, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed
        ),
    )


@dataclass
class Measurement:
    """Headline numbers of one benchmark run."""

    run_dir: Path
    report: str | None
    rows: list[dict]
    clean: list[dict]

    def by_intervention(self) -> dict[str, dict[str, float]]:
        """Majority robustness and length change per intervention, pooled over timesteps (chain-weighted)."""
        acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
        for r in self.rows:
            n = r["n_chains"]
            cell = acc[r["intervention"]]
            cell[0] += n
            cell[1] += n * r["majority_mean"]
            if r["whole_pct_mean"] == r["whole_pct_mean"]:  # not NaN
                cell[2] += n * r["whole_pct_mean"]
                cell[3] += n
        return {
            name: {
                "chains": c[0],
                "majority": c[1] / c[0] if c[0] else float("nan"),
                "length_pct": c[2] / c[3] if c[3] else float("nan"),
            }
            for name, c in acc.items()
        }

    @property
    def clean_accuracy(self) -> float:
        n = sum(c["n"] for c in self.clean)
        return sum(c["accuracy"] * c["n"] for c in self.clean) / n if n else float("nan")


def measure(config: RunConfig, *, progress: bool = True, stages: list[str] | None = None) -> Measurement:
    """Run (or resume) a benchmark (all stages, or ``stages``) and read back its headline numbers."""
    from recovery.pipeline import STAGES
    from recovery.store import RunDir

    summary = run_pipeline(config, stages=stages or list(STAGES), progress=progress)
    run = RunDir(config.run_dir)
    return Measurement(Path(config.run_dir), summary.report, read_aggregates(run), read_clean_accuracy(run))


@dataclass
class DemoResult:
    before: Measurement
    after: Measurement | None = None
    comparison_report: str | None = None
    comparison_summary: str = ""
    training: dict[str, Any] = field(default_factory=dict)
    clean_before: float | None = None  # on DemoSize.clean_problems problems (see `_clean`)
    clean_after: float | None = None
    clean_n_before: int = 0  # problems behind clean_before / clean_after
    clean_n_after: int = 0
    comparison: Any = None  # the `recovery.report.compare.Comparison` of before and after

    @property
    def report(self) -> str | None:
        return self.comparison_report or self.before.report

    def summary_table(self) -> RichTable:
        """Per intervention: majority robustness (and its change) and CoT-length change, before/after."""
        title = "tiny reasoner: majority robustness by intervention (pooled over timesteps)"
        table = RichTable(title=title)
        columns = ["intervention", "before"] + (["after", "change"] if self.after else []) + ["length before"]
        columns += ["length after"] if self.after else []
        for col in columns:
            table.add_column(col, justify="left" if col == "intervention" else "right")
        before = self.before.by_intervention()
        after = self.after.by_intervention() if self.after else {}
        for name in sorted(before):
            b = before[name]
            row = [name, f"{b['majority']:.1%}"]
            if self.after:
                a = after.get(name, {"majority": float("nan"), "length_pct": float("nan")})
                row += [f"{a['majority']:.1%}", f"{100 * (a['majority'] - b['majority']):+.1f} pts"]
            row.append(f"{b['length_pct']:+.0f}%")
            if self.after:
                row.append(f"{a['length_pct']:+.0f}%")
            table.add_row(*row)
        caption = f"clean accuracy before: {self.before.clean_accuracy:.1%}"
        if self.after:
            caption += f", after: {self.after.clean_accuracy:.1%}"
        caption += self._more_clean_caption()
        table.caption = caption + " (length: whole CoT without the inserted text vs the original CoT)"
        return table

    def _more_clean_caption(self) -> str:
        """Clean accuracy on the larger clean-only set: each side with its n and 95 % Wilson interval, and
        the change paired over problems when both sides were measured."""
        from recovery.metrics import wilson_interval

        if self.clean_before is None:
            return ""
        sides = [("before", self.clean_before, self.clean_n_before), ("after", self.clean_after, self.clean_n_after)]
        parts = []
        for name, acc, n in sides:
            if acc is None:
                continue
            low, high = wilson_interval(round(acc * n), n) if n else (float("nan"), float("nan"))
            parts.append(f"{name}: {acc:.1%} of {n} [{low:.1%}, {high:.1%}]")
        text = "; on more problems " + ", ".join(parts)
        rows = getattr(self.comparison, "clean_runs", ())
        if rows and rows[0]["pairs"]:
            r = rows[0]
            interval = f"[{r['ci_low']:+.1f}, {r['ci_high']:+.1f}]"
            text += f", change {r['delta']:+.1f} pts {interval} paired over {r['pairs']} problems"
        return text


def _clean(out: Path, size: DemoSize, seed: int, model: ModelConfig | None, progress: bool) -> tuple[float | None, int]:
    """Clean accuracy on ``size.clean_problems`` evaluation problems (original traces only) and the number
    of problems it is over; (None, 0) when the size measures none."""
    if size.clean_problems <= 0:
        return None, 0
    config = demo_config(out, seed=seed, size=size, model=model, limit=size.clean_problems)
    m = measure(config, progress=progress, stages=["problems", "traces", "filter"])
    return m.clean_accuracy, sum(int(c["n"]) for c in m.clean)


def compare_demo_runs(out: str | Path):
    """Compare the demo's ``before`` and ``after`` runs under ``out`` (with ``before-clean`` and
    ``after-clean`` as the larger clean-accuracy set when both exist) and write ``out/compare``.
    Returns the `recovery.report.compare.Comparison` and the written report's paths."""
    from recovery.report import write_report
    from recovery.report.compare import comparison_report, compute_comparison

    out = Path(out)
    clean = (out / "before-clean", out / "after-clean")
    has_clean = all(is_run_dir(p) for p in clean)
    comp = compute_comparison(
        out / "before", out / "after", ("before", "after"), clean_runs=clean if has_clean else None
    )
    return comp, write_report(comparison_report(comp), out / "compare")


def _all_cpu_threads() -> None:
    # Generation of the tiny model runs on one thread (see recovery.pipeline.backend); training batches
    # are big enough to use every core.
    import os

    import torch

    torch.set_num_threads(os.cpu_count() or 1)


def _train_sft(
    out: Path, data_runs: list[Path], eval_run: Path, steps: int, seed: int, lr: float, clean_fraction: float = 0.75
) -> Path:
    """SFT of the tiny reasoner on recovery traces built from ``data_runs`` (own recoveries + toy teacher,
    ``clean_fraction`` of clean traces), decontaminated against ``eval_run``'s problems. Returns the
    trained model folder."""
    from recovery.training.sft import main, make_parser

    _all_cpu_threads()
    model_dir = out / "model-sft"
    # The toy teacher restarts the chain after its doubt. Recoveries that resume from the last correct step
    # taught the model to copy a state across the inserted text: adversarial robustness fell 9.6 points in
    # the quick demo, where restarting gained 14.6; the full demo gained 19.0 (220 SFT steps) and 21.8 (300).
    script_args, training_args, model_args = make_parser().parse_dict(
        {
            "model_name_or_path": "tiny-reasoner",
            "dtype": "float32",
            "run_dir": str(data_runs[0]),
            "more_run_dirs": [str(p) for p in data_runs[1:]],
            "model_spec": "tiny-reasoner",
            "sft_sources": ["own", "teacher"],
            "teacher": "toy",
            "toy_teacher_restart": True,
            "clean_fraction": clean_fraction,
            "max_overhead_pct": 100.0,
            "decontaminate_run_dirs": [str(eval_run)],
            "robustness": False,
            "dataset_name": None,
            "output_dir": str(model_dir),
            "seed": seed,
            "max_steps": steps,
            "per_device_train_batch_size": 32,
            "learning_rate": lr,
            "lr_scheduler_type": "cosine",
            "warmup_steps": 0.05,
            "completion_only_loss": True,
            "max_length": 512,
            "use_cpu": True,
            "bf16": False,
            "eval_strategy": "no",
            "logging_steps": 20,
            "save_strategy": "no",
            "report_to": "none",
            "disable_tqdm": True,
        }
    )
    main(script_args, training_args, model_args)
    return model_dir


def _train_grpo(out: Path, data_run: Path, eval_run: Path, start: Path, steps: int, seed: int) -> Path:
    """A short GRPO run (correctness + doubt + length rewards, KL term, small learning rate) from ``start``."""
    from recovery.training.grpo import main, make_parser

    _all_cpu_threads()
    model_dir = out / "model-grpo"
    script_args, training_args, model_args = make_parser().parse_dict(
        {
            "model_name_or_path": str(start),
            "dtype": "float32",
            "run_dir": str(data_run),
            "model_spec": "tiny-reasoner",
            "decontaminate_run_dirs": [str(eval_run)],
            "robustness": False,
            "dataset_name": None,
            "reward_funcs": ["correctness", "doubt", "length"],
            "output_dir": str(model_dir),
            "seed": seed,
            "max_steps": steps,
            "per_device_train_batch_size": 8,
            "num_generations": 4,
            "max_completion_length": TOY_MAX_NEW_TOKENS,
            "learning_rate": 1.0e-5,
            "beta": 0.04,
            "use_cpu": True,
            "bf16": False,
            "logging_steps": 5,
            "save_strategy": "no",
            "report_to": "none",
            "disable_tqdm": True,
        }
    )
    main(script_args, training_args, model_args)
    return model_dir


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
    benchmark stages are skipped on a re-run (training re-runs)."""
    out = Path(out)
    size = size or DemoSize.of(quick)
    phase = _phases(progress, 5 if train else 1)
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
    phase("train (SFT" + (", then GRPO)" if grpo else ")"))
    model_dir = _train_sft(
        out, data_runs, before.run_dir, size.sft_steps, seed, size.sft_learning_rate, size.sft_clean_fraction
    )
    result.training["sft_steps"] = size.sft_steps
    if grpo:
        model_dir = _train_grpo(out, data_runs[0], before.run_dir, model_dir, size.grpo_steps, seed)
        result.training["grpo"] = True
    phase("measure again")
    tuned = ModelConfig(
        name="tiny-reasoner-recovery",
        path=str(model_dir),
        spec="tiny-reasoner",
        batch_size=16,
        data_parallel_size=replicas(),
    )
    result.after = measure(demo_config(out / "after", seed=seed, size=size, model=tuned), progress=progress)
    result.clean_after, result.clean_n_after = _clean(out / "after-clean", size, seed, tuned, progress)
    phase("compare")
    result.comparison, paths = compare_demo_runs(out)
    result.comparison_report = str(paths.html)
    result.comparison_summary = result.comparison.summary
    return result
