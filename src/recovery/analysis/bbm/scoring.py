"""Scoring one answer against the human annotation, and accuracy per model × task with Wilson intervals."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.analysis.bbm.data import BBM_TASKS, BBMItem
from recovery.analysis.bbm.prompt import ParsedAnswer
from recovery.metrics import wilson_interval, z_score

# Outcomes of one answer. Only CORRECT counts as correct; the others say why not.
CORRECT = "correct"
WRONG_STEP = "wrong_step"
MISSED_MISTAKE = "missed_mistake"  # answered "no mistake" on a trace that has one
FALSE_ALARM = "false_alarm"  # named a step on a trace without a mistake
OUT_OF_RANGE = "step_out_of_range"  # named a step the solution does not have
UNPARSEABLE = "unparseable"
GENERATION_ERROR = "generation_error"  # the backend returned no reply (retried on the next run)
OUTCOMES: tuple[str, ...] = (
    CORRECT,
    WRONG_STEP,
    MISSED_MISTAKE,
    FALSE_ALARM,
    OUT_OF_RANGE,
    UNPARSEABLE,
    GENERATION_ERROR,
)


def score_answer(item: BBMItem, parsed: ParsedAnswer) -> str:
    """The outcome (one of `OUTCOMES`) of ``parsed`` on ``item``; only `CORRECT` counts as correct."""
    if parsed.kind == "unparseable":
        return UNPARSEABLE
    if parsed.kind == "no_mistake":
        return CORRECT if item.gold_step is None else MISSED_MISTAKE
    if parsed.step is None or not 1 <= parsed.step <= len(item.steps):
        return OUT_OF_RANGE
    if item.gold_step is None:
        return FALSE_ALARM
    return CORRECT if parsed.step == item.gold_step else WRONG_STEP


# The z of a 95 % interval, kept for callers that imported it from here; `wilson_interval` lives in
# `recovery.metrics` (re-exported here) so every 0/1 interval in the project is computed in one place.
Z95 = z_score(0.95)


@dataclass(frozen=True)
class TaskAccuracy:
    """Accuracy of one model on one task (``task="all"``: pooled), with a 95 % Wilson interval.

    ``n`` counts every answered item; unparseable replies and generation errors are in ``n`` as wrong.
    ``with_mistake``/``without_mistake`` split the items by whether the trace has a mistake.
    """

    model: str
    task: str
    n: int
    correct: int
    ci_low: float
    ci_high: float
    n_with_mistake: int
    correct_with_mistake: int
    n_without_mistake: int
    correct_without_mistake: int
    outcomes: Mapping[str, int]

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else math.nan


def accuracy_table(rows: Iterable[Mapping[str, Any]], *, pooled: bool = True) -> list[TaskAccuracy]:
    """Per (model, task) accuracy from answer rows (``model``, ``task``, ``gold_step``, ``outcome``);
    with ``pooled`` also one ``task="all"`` entry per model. Order: models as first seen, tasks in
    `BBM_TASKS` order (others after, sorted)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    models: list[str] = []
    for row in rows:
        if row["model"] not in models:
            models.append(row["model"])
        groups[(row["model"], row["task"])].append(row)
        if pooled:
            groups[(row["model"], "all")].append(row)
    tasks = sorted({t for _, t in groups if t != "all"}, key=_task_order)
    out = []
    for model in models:
        for task in [*tasks, *(["all"] if pooled else [])]:
            group = groups.get((model, task))
            if group:
                out.append(_accuracy(model, task, group))
    return out


def _task_order(task: str) -> tuple[int, str]:
    return (BBM_TASKS.index(task) if task in BBM_TASKS else len(BBM_TASKS), task)


def _accuracy(model: str, task: str, group: Sequence[Mapping[str, Any]]) -> TaskAccuracy:
    ok = [r["outcome"] == CORRECT for r in group]
    has = [r["gold_step"] is not None for r in group]
    low, high = wilson_interval(sum(ok), len(ok))
    return TaskAccuracy(
        model=model,
        task=task,
        n=len(ok),
        correct=sum(ok),
        ci_low=low,
        ci_high=high,
        n_with_mistake=sum(has),
        correct_with_mistake=sum(o for o, h in zip(ok, has) if h),
        n_without_mistake=len(has) - sum(has),
        correct_without_mistake=sum(o for o, h in zip(ok, has) if not h),
        outcomes=dict(Counter(r["outcome"] for r in group)),
    )
