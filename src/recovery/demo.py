"""The embedded default run: the tiny reasoner on the toy world, end to end on a CPU with no downloads."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

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
from recovery.pipeline.aggregate import read_aggregates, read_clean_accuracy
from recovery.store import RunDir

TOY_INTERVENTIONS = (
    "toy/complete_step", "toy/paraphrase", "toy/random_characters", "toy/wikipedia_text",
    "toy/wrong_continuation", "toy/hallucinated_fact", "toy/unrelated_cot",
)  # fmt: skip
# The tiny reasoner's traces are ~100 tokens; 320 new tokens leave room for a long recovery.
TOY_MAX_NEW_TOKENS = 320


def demo_config(out: str | Path, *, quick: bool = False, seed: int = 0) -> RunConfig:
    """The demo's run config: paper protocol (Table 15 decoding, N=8, five timesteps) at toy scale."""
    return RunConfig(
        run_dir=str(out),
        title="recovery demo: tiny reasoner on the toy world",
        dataset=DatasetConfig(name="toy", limit=12 if quick else 40, options={"seed": 1000 + seed}),
        models=[ModelConfig(name="tiny-reasoner", batch_size=16)],
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed)),
        interventions=InterventionsConfig(
            names=list(TOY_INTERVENTIONS), timesteps=[0.3, 0.5, 0.7] if quick else [0.1, 0.3, 0.5, 0.7, 0.9], seed=seed
        ),
        continuation=SamplingConfig(n=4 if quick else 8, temperature=0.6, top_p=0.95, max_new_tokens=TOY_MAX_NEW_TOKENS, seed=seed),
    )


@dataclass
class DemoResult:
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
            name: {"chains": c[0], "majority": c[1] / c[0] if c[0] else float("nan"),
                   "length_pct": c[2] / c[3] if c[3] else float("nan")}
            for name, c in acc.items()
        }  # fmt: skip

    def summary_table(self) -> RichTable:
        table = RichTable(title="tiny reasoner: majority robustness by intervention (all timesteps)")
        for col in ("intervention", "chains", "majority robust", "CoT length change"):
            table.add_column(col, justify="left" if col == "intervention" else "right")
        for name, cell in sorted(self.by_intervention().items()):
            table.add_row(name, str(int(cell["chains"])), f"{cell['majority']:.1%}", f"{cell['length_pct']:+.0f}%")
        for c in self.clean:
            table.caption = f"clean accuracy of the original traces: {c['accuracy']:.1%} of {c['n']} problems"
        return table


def run_demo(out: str | Path = "runs/demo", *, quick: bool = False, progress: bool = True, seed: int = 0) -> DemoResult:
    """Run (or resume) the demo benchmark into ``out`` and return its headline numbers."""
    config = demo_config(out, quick=quick, seed=seed)
    summary = run_pipeline(config, progress=progress)
    run = RunDir(out)
    return DemoResult(Path(out), summary.report, read_aggregates(run), read_clean_accuracy(run))
