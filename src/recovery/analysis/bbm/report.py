"""The report section: accuracy tables (the paper's Table 11 layout), outcome counts and a bar chart."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from recovery.analysis.bbm.config import BBMConfig
from recovery.analysis.bbm.data import BBM_TASKS
from recovery.analysis.bbm.paper import PAPER_TABLE11, TASK_TITLES, paper_row_name
from recovery.analysis.bbm.scoring import GENERATION_ERROR, OUTCOMES, UNPARSEABLE, TaskAccuracy, accuracy_table
from recovery.data.skips import Skips
from recovery.report.data import Figure, Section, Table


def _pct(value: float) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def _frac(k: int, n: int) -> str:
    return f"{k}/{n} ({_pct(k / n)} %)" if n else "–"


def bbm_section(
    rows: Sequence[Mapping[str, Any]], *, config: BBMConfig | None = None, skips: Skips | None = None
) -> Section:
    """The report section: accuracy per model × task (Table 11 layout), counts and intervals, the reasons
    replies were not usable, the paper's numbers for the same models, and a bar chart."""
    accs = accuracy_table(rows)
    models = list(dict.fromkeys(a.model for a in accs))
    tasks = [t for t in dict.fromkeys(a.task for a in accs) if t != "all"]
    by = {(a.model, a.task): a for a in accs}
    columns = ["Model", *(TASK_TITLES.get(t, t) for t in tasks), "All"]
    main = Table(
        "Error-localisation accuracy (%)",
        columns,
        [(m, *(_pct(by[(m, t)].accuracy) if (m, t) in by else "–" for t in [*tasks, "all"])) for m in models],
        align=["l", *["r"] * (len(columns) - 1)],
        caption="Share of traces whose first mistake (or its absence) the model located; layout of the paper's "
        "Table 11. Unparseable replies and generation errors count as wrong.",
    )
    detail = Table(
        "Counts and 95 % intervals",
        [
            "Model",
            "Task",
            "n",
            "Correct",
            "Accuracy (%)",
            "95 % CI (%)",
            "Traces with a mistake",
            "Traces without",
            "Unparseable",
            "Gen. errors",
        ],
        [
            (
                a.model,
                TASK_TITLES.get(a.task, a.task),
                a.n,
                a.correct,
                _pct(a.accuracy),
                f"[{_pct(a.ci_low)}, {_pct(a.ci_high)}]",
                _frac(a.correct_with_mistake, a.n_with_mistake),
                _frac(a.correct_without_mistake, a.n_without_mistake),
                a.outcomes.get(UNPARSEABLE, 0),
                a.outcomes.get(GENERATION_ERROR, 0),
            )
            for a in accs
        ],
        align=["l", "l", "r", "r", "r", "r", "r", "r", "r", "r"],
        caption="Wilson score intervals. 'Traces with a mistake': correct step found; 'without': 'no mistake' "
        "answered.",
    )
    tables: list[Table] = [main, detail, _outcome_table(rows, models)]
    reasons = _reason_table(rows)
    if reasons is not None:
        tables.append(reasons)
    paper = _paper_table(models, tasks)
    if paper is not None:
        tables.append(paper)
    if skips is not None and skips.total:
        tables.append(Table("Rows left out of the data", ["Reason", "Count", "Examples"], skips.table_rows()))
    figure = accuracy_figure(accs)
    return Section(
        "BIG-Bench Mistake",
        _prose(rows, config),
        figures=(figure,) if figure is not None else (),
        tables=tuple(tables),
    )


def _prose(rows: Sequence[Mapping[str, Any]], config: BBMConfig | None) -> str:
    sampling = ""
    if config is not None:
        s = config.sampling
        sampling = {
            "greedy": "greedy decoding",
            "recommended": "each model's recommended sampling (model card; per-model overrides applied)",
            "custom": f"T={s.temperature}, top_p={s.top_p}, top_k={s.top_k}",
        }[s.mode] + f", at most {s.max_new_tokens} new tokens, seed {s.seed}"
    return (
        "Each model sees a BIG-Bench Mistake question (Tyen et al., 2024) with its PaLM 2 solution, steps "
        "numbered from 1, and is asked zero-shot for the first incorrect step or 'No mistake' (paper §3, "
        "App. A.3). The paper does not print its prompt; ours is in `recovery.analysis.bbm.build_prompt`. "
        "The final answer is read after the closing think tag: a `\\boxed{}` answer, an 'Answer:' line, a "
        "'first mistake … step N' phrase, or a single step named; anything else is unparseable and counted "
        f"as wrong. {len(rows)} answers" + (f"; decoding: {sampling}." if sampling else ".")
    )


def _outcome_table(rows: Sequence[Mapping[str, Any]], models: Sequence[str]) -> Table:
    counts = Counter((r["model"], r["outcome"]) for r in rows)
    present = [o for o in OUTCOMES if any(counts[(m, o)] for m in models)]
    return Table(
        "Outcomes",
        ["Model", *present],
        [(m, *(counts[(m, o)] for o in present)) for m in models],
        align=["l", *["r"] * len(present)],
        caption="missed_mistake: said 'no mistake' on a trace with one; false_alarm: named a step on a trace "
        "without one; step_out_of_range: named a step the solution does not have.",
    )


def _reason_table(rows: Sequence[Mapping[str, Any]]) -> Table | None:
    bad = [r for r in rows if r["outcome"] in (UNPARSEABLE, GENERATION_ERROR)]
    if not bad:
        return None
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in bad:
        # Details carry numbers (step numbers, prompt lengths); without them equal reasons group together.
        reason = re.sub(r"\d+", "N", r["detail"] or "")[:160]
        groups[(r["model"], r["outcome"], reason)].append(r["item_id"])
    return Table(
        "Replies not counted as an answer",
        ["Model", "Outcome", "Reason", "Count", "Example items"],
        [(m, o, reason, len(ids), ", ".join(sorted(ids)[:3])) for (m, o, reason), ids in sorted(groups.items())],
        align=["l", "l", "l", "r", "l"],
        collapsed=True,
    )


def _paper_table(models: Sequence[str], tasks: Sequence[str]) -> Table | None:
    matched = [(m, paper_row_name(m)) for m in models]
    matched = [(m, p) for m, p in matched if p is not None]
    if not matched:
        return None
    return Table(
        "The paper's Table 11 for the same models (%)",
        ["Model", "Paper row", *(TASK_TITLES.get(t, t) for t in tasks)],
        [
            (m, p, *(f"{PAPER_TABLE11[p][BBM_TASKS.index(t)]:.1f}" if t in BBM_TASKS else "–" for t in tasks))
            for m, p in matched
        ],
        align=["l", "l", *["r"] * len(tasks)],
        caption="Reference only: the paper's prompt, decoding and item subset may differ from this run's.",
    )


def accuracy_figure(accs: Sequence[TaskAccuracy]) -> Figure | None:
    """Grouped bars: accuracy per task (and pooled), one bar per model, with 95 % interval whiskers."""
    from recovery.report import figures as rf  # lazy: loads matplotlib

    if not accs:
        return None
    models = list(dict.fromkeys(a.model for a in accs))
    tasks = list(dict.fromkeys(a.task for a in accs))
    by = {(a.model, a.task): a for a in accs}
    colors = rf.model_colors(models)
    width = 0.8 / len(models)
    with rf.figure_style():  # the report's fixed rc settings, so every figure looks alike and renders the same
        fig = rf.new_figure(figsize=(max(5.0, 1.1 * len(tasks) + 0.25 * len(models) * len(tasks)), 3.4))
        ax = fig.add_subplot(1, 1, 1)
        for j, model in enumerate(models):
            xs, ys, lo, hi = [], [], [], []
            for i, task in enumerate(tasks):
                a = by.get((model, task))
                if a is None or not a.n:
                    continue
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(100 * a.accuracy)
                lo.append(100 * (a.accuracy - a.ci_low))
                hi.append(100 * (a.ci_high - a.accuracy))
            ax.bar(
                xs,
                ys,
                width=width * 0.92,
                color=colors[model],
                label=model,
                yerr=[lo, hi],
                error_kw={"elinewidth": 0.8, "capsize": 2},
            )
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels([TASK_TITLES.get(t, "All" if t == "all" else t) for t in tasks])
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy (%)")
        ax.set_title("BIG-Bench Mistake: first-mistake localisation")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        fig.tight_layout()
        png = rf.to_png(fig)
    return Figure("bbm_accuracy", png, "Accuracy per task with 95 % Wilson intervals.")
