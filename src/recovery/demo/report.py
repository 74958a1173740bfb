"""The demo's before/after report (``out/compare``): the comparison of the base model and the trained one,
what GRPO adds beyond SFT (when the demo ran it), and doubt after the intervention at every stage, the
paper's Fig. 5 for the toy model before and after training.

Every stage is measured on the same evaluation problems, interventions and timesteps, so the stages differ
only by the model; each change carries its interval paired over the chains both runs share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recovery.analysis.doubt_curve import analyze_doubt
from recovery.analysis.doubt_stages import StageDoubt, doubt_stages_lines, doubt_stages_section
from recovery.demo.training import GRPO_MODEL, GRPO_ONLY_MODEL
from recovery.report import write_report
from recovery.report.compare import Comparison, comparison_report, compute_comparison
from recovery.report.compare_section import change_tables
from recovery.report.data import Section, Table
from recovery.report.training_curves import grpo_figure, robustness_figure, robustness_table
from recovery.run_dir import is_run_dir

# One run directory per model, so `recovery demo` and `recovery demo --grpo` in the same directory share
# every run both measure (the base model, the training data, the SFT model) and neither refuses the other's.
SFT_RUN = "after"  # the SFT model's benchmark run
GRPO_RUN = "after-grpo"  # the SFT+GRPO model's run, with --grpo
GRPO_ONLY_RUN = "after-grpo-only"  # the base model trained by GRPO alone, with --grpo-only
# The model GRPO starts from, measured on training problems to choose the prompts whose groups disagree.
CHOICE_SFT_RUN = "train-sft"
CHOICE_BASE_RUN = "train-base"
GRPO_LOG = "log_history.json"  # in a GRPO model's folder: the trainer's log history, the curves' source
GRPO_TITLE = "What GRPO adds beyond SFT"
CURVES_TITLE = "GRPO training curves"


def final_run(training: dict[str, Any]) -> str:
    """The run of the model the demo ends with: SFT+GRPO when GRPO followed SFT, GRPO alone with --grpo-only,
    else SFT."""
    if training.get("grpo_only"):
        return GRPO_ONLY_RUN
    return GRPO_RUN if training.get("grpo") else SFT_RUN


def grpo_model(training: dict[str, Any]) -> str | None:
    """The folder (under the demo's directory) of the GRPO model the demo ended with; None without GRPO."""
    if training.get("grpo_only"):
        return GRPO_ONLY_MODEL
    return GRPO_MODEL if training.get("grpo") else None


@dataclass(frozen=True)
class DemoReport:
    """The comparison base → trained, the one SFT → SFT+GRPO (None without GRPO), the doubt headline per
    stage, and the written report's paths."""

    comparison: Comparison
    grpo_comparison: Comparison | None
    doubt_lines: tuple[str, ...]
    paths: Any


def stage_runs(out: Path, training: dict[str, Any]) -> list[tuple[str, Path]]:
    """``(label, run directory)`` of each measured stage, in training order: base, SFT, SFT+GRPO."""
    if training.get("grpo_only"):
        runs = [("base", out / "before"), ("GRPO", out / GRPO_ONLY_RUN)]
    else:
        runs = [("base", out / "before"), ("SFT", out / SFT_RUN)]
    if training.get("grpo"):
        runs.append(("SFT+GRPO", out / GRPO_RUN))
    return [(label, path) for label, path in runs if is_run_dir(path)]


def _clean_pair(out: Path, before: str, after: str) -> tuple[Path, Path] | None:
    pair = (out / f"{before}-clean", out / f"{after}-clean")
    return pair if all(is_run_dir(p) for p in pair) else None


def grpo_section(comp: Comparison, rewards: dict[str, float]) -> Section:
    """The SFT → SFT+GRPO changes (overall, by intervention and by timestep, with their paired intervals),
    with each reward's mean over GRPO training."""
    rewards_table = Table(
        "Reward means over GRPO training",
        ["reward", "mean"],
        [(name, f"{value:+.3f}") for name, value in rewards.items()],
        align=["l", "r"],
        caption="The average of the per-step means TRL logged for each reward function.",
    )
    tables = (*change_tables(comp), *((rewards_table,) if rewards else ()))
    return Section(GRPO_TITLE, comp.summary, tables=tables)


def curves_section(log_history: list[dict[str, Any]]) -> Section | None:
    """The curves of the GRPO run (`recovery.report.training_curves`); None when it logged none of them."""
    drawn = [f for f in (grpo_figure(log_history), robustness_figure(log_history)) if f is not None]
    table = robustness_table(log_history)
    if not drawn and table is None:
        return None
    text = (
        "What the trainer logged at every GRPO step, and the robustness callback's mini-benchmark during "
        "training (its problems and traces are not the benchmark run's: a monitor, not the result above)."
    )
    return Section(CURVES_TITLE, text, figures=tuple(drawn), tables=(table,) if table is not None else ())


def read_log_history(out: Path, training: dict[str, Any]) -> list[dict[str, Any]]:
    """The GRPO run's log history the demo kept beside its model (empty without GRPO or without the file)."""
    model = grpo_model(training)
    path = out / model / GRPO_LOG if model else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else []


def write_demo_report(out: str | Path, training: dict[str, Any]) -> DemoReport:
    """Compare the demo's runs under ``out`` and write ``out/compare``; the doubt analysis of each stage's
    run is (re)computed and stored in that run."""
    out = Path(out)
    final = final_run(training)
    comp = compute_comparison(
        out / "before", out / final, ("before", "after"), clean_runs=_clean_pair(out, "before", final)
    )
    data = comparison_report(comp)
    added: list[Section] = []
    grpo_comp = None
    if training.get("grpo") and is_run_dir(out / SFT_RUN):
        grpo_comp = compute_comparison(
            out / SFT_RUN, out / GRPO_RUN, ("SFT", "SFT+GRPO"), clean_runs=_clean_pair(out, SFT_RUN, GRPO_RUN)
        )
        added.append(grpo_section(grpo_comp, training.get("grpo_rewards", {})))
    curves = curves_section(read_log_history(out, training))
    if curves is not None:
        added.append(curves)
    stages = [StageDoubt(label, analyze_doubt(path, progress=False)) for label, path in stage_runs(out, training)]
    added.append(doubt_stages_section(stages))
    # After the comparison, before the runs' metadata.
    data = replace(data, sections=(data.sections[0], *added, *data.sections[1:]))
    paths = write_report(data, out / "compare")
    return DemoReport(comp, grpo_comp, tuple(doubt_stages_lines(stages)), paths)
