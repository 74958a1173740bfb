"""The demo's results: the headline numbers of each benchmark run, the before/after table, and the comparison
report of the ``before`` and ``after`` runs."""

from __future__ import annotations

import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable

from recovery.metrics import wilson_interval
from recovery.pipeline import STAGES, run_pipeline
from recovery.pipeline.outcome import NothingMeasured
from recovery.run_config import RunConfig
from recovery.run_dir import open_run


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
    """Run (or resume) a benchmark (all stages, or ``stages``) and read back its headline numbers; a run that
    measured nothing raises `NothingMeasured` with its run directory in the message."""

    try:
        summary = run_pipeline(config, stages=stages or list(STAGES), progress=progress)
    except NothingMeasured as err:  # the demo makes several runs: say which one measured nothing
        raise NothingMeasured(f"{config.run_dir}: {err}", err.summary) from None
    run = open_run(config.run_dir)
    return Measurement(Path(config.run_dir), summary.report, run.aggregates(), run.clean_accuracy())


@dataclass
class DemoResult:
    before: Measurement
    after: Measurement | None = None
    comparison_report: str | None = None
    comparison_summary: str = ""
    training: dict[str, Any] = field(default_factory=dict)
    clean_before: float | None = None  # on DemoSize.clean_problems problems (original traces only)
    clean_after: float | None = None
    clean_n_before: int = 0  # problems behind clean_before / clean_after
    clean_n_after: int = 0
    comparison: Any = None  # the `recovery.report.compare.Comparison` of before and after
    # With GRPO: the SFT model measured on the same problems, and the comparison SFT → SFT+GRPO.
    sft: Measurement | None = None
    clean_sft: float | None = None
    clean_n_sft: int = 0
    grpo_comparison: Any = None
    doubt_lines: tuple[str, ...] = ()  # doubt after the intervention per stage (`recovery.demo.report`)
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per demo phase, in order
    train_runtime: dict[str, float] = field(default_factory=dict)  # "sft" / "grpo": TRL's train_runtime

    @property
    def report(self) -> str | None:
        return self.comparison_report or self.before.report

    @property
    def view_command(self) -> str:
        """The command that browses the measured chains (`recovery.viewer`): the run after training beside the one
        before it, to see which chains changed outcome."""
        after = self.after
        compare = f" --compare {shlex.quote(str(after.run_dir))}" if after is not None else ""
        return f"recovery view {shlex.quote(str(self.before.run_dir))}{compare}"

    def summary_table(self) -> RichTable:
        """Per intervention: majority robustness (and its change) and CoT-length change, before/after."""
        title = "tiny reasoner: majority robustness by intervention (pooled over timesteps)"
        table = RichTable(title=title)
        sft = ["SFT"] if self.sft else []
        columns = ["intervention", "before", *sft] + (["after", "change"] if self.after else []) + ["length before"]
        columns += ["length after"] if self.after else []
        for col in columns:
            table.add_column(col, justify="left" if col == "intervention" else "right")
        before = self.before.by_intervention()
        middle = self.sft.by_intervention() if self.sft else {}
        after = self.after.by_intervention() if self.after else {}
        missing = {"majority": float("nan"), "length_pct": float("nan")}
        for name in sorted(before):
            b = before[name]
            row = [name, f"{b['majority']:.1%}"]
            if self.sft:
                row.append(f"{middle.get(name, missing)['majority']:.1%}")
            if self.after:
                a = after.get(name, missing)
                row += [f"{a['majority']:.1%}", f"{100 * (a['majority'] - b['majority']):+.1f} pts"]
            row.append(f"{b['length_pct']:+.0f}%")
            if self.after:
                row.append(f"{a['length_pct']:+.0f}%")
            table.add_row(*row)
        caption = f"clean accuracy before: {self.before.clean_accuracy:.1%}"
        if self.sft:
            caption += f", after SFT: {self.sft.clean_accuracy:.1%}"
        if self.after:
            caption += f", after: {self.after.clean_accuracy:.1%}"
        caption += self._more_clean_caption()
        table.caption = caption + " (length: whole CoT without the inserted text vs the original CoT)"
        return table

    def _more_clean_caption(self) -> str:
        """Clean accuracy on the larger clean-only set: each side with its n and 95 % Wilson interval, and
        the change paired over problems when both sides were measured."""

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


def compare_demo_runs(out: str | Path, training: dict[str, Any] | None = None):
    """Compare the demo's runs under ``out`` (``before`` and ``after``, the SFT model, with ``after-grpo``
    when GRPO followed SFT, and the ``*-clean`` runs as the larger clean-accuracy set) and write ``out/compare``
    (`recovery.demo.report`). Returns the `recovery.demo.report.DemoReport`."""
    from recovery.demo.report import write_demo_report  # lazy: loads matplotlib

    return write_demo_report(out, training or {})
