"""BIG-Bench Hard (Suzgun et al., 2023): the paper's Logic domain (§3.2).

The paper uses five subsets (`PAPER_BBH_TASKS`). Each example is ``{"input", "target"}``; the input already
holds the whole question, options included, so it is used verbatim as `Problem.question`.

Sources:

* local files ``<dir>/<task>.json`` as in github.com/suzgunmirac/BIG-Bench-Hard (``bbh/<task>.json``:
  ``{"canary": ..., "examples": [...]}``);
* the Hub: ``lukaemon/bbh`` (one config per task, split ``test``; the default) or
  ``maveriq/bigbenchhard`` (one config per task, split ``train``). Both have string columns ``input`` and
  ``target``.

Ids are ``bbh/<task>/<index>`` with the index of the example in its task file — the same on the Hub,
which holds the examples in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from recovery.data.common import DatasetSpec, gold_problem, in_folder, reject, task_file, text_fields
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, iter_rows, read_file_rows
from recovery.types import AnswerType, Problem

__all__ = [
    "BBH_ANSWER_TYPES",
    "PAPER_BBH_TASKS",
    "BBH_HUB_ID",
    "BBH_HUB_SPLITS",
    "BBH_HUB",
    "load_bbh",
    "bbh_problems",
]

A = AnswerType
#: Answer type of every BBH task (targets as written in the BBH files).
BBH_ANSWER_TYPES: Mapping[str, AnswerType] = {
    "boolean_expressions": A.TRUE_FALSE,
    "causal_judgement": A.YES_NO,
    "date_understanding": A.MULTIPLE_CHOICE,
    "disambiguation_qa": A.MULTIPLE_CHOICE,
    "dyck_languages": A.DYCK,
    "formal_fallacies": A.VALID_INVALID,
    "geometric_shapes": A.MULTIPLE_CHOICE,
    "hyperbaton": A.MULTIPLE_CHOICE,
    "logical_deduction_five_objects": A.MULTIPLE_CHOICE,
    "logical_deduction_seven_objects": A.MULTIPLE_CHOICE,
    "logical_deduction_three_objects": A.MULTIPLE_CHOICE,
    "movie_recommendation": A.MULTIPLE_CHOICE,
    "multistep_arithmetic_two": A.NUMERIC,
    "navigate": A.YES_NO,
    "object_counting": A.NUMERIC,
    "penguins_in_a_table": A.MULTIPLE_CHOICE,
    "reasoning_about_colored_objects": A.MULTIPLE_CHOICE,
    "ruin_names": A.MULTIPLE_CHOICE,
    "salient_translation_error_detection": A.MULTIPLE_CHOICE,
    "snarks": A.MULTIPLE_CHOICE,
    "sports_understanding": A.YES_NO,
    "temporal_sequences": A.MULTIPLE_CHOICE,
    "tracking_shuffled_objects_five_objects": A.MULTIPLE_CHOICE,
    "tracking_shuffled_objects_seven_objects": A.MULTIPLE_CHOICE,
    "tracking_shuffled_objects_three_objects": A.MULTIPLE_CHOICE,
    "web_of_lies": A.YES_NO,
    "word_sorting": A.EXACT,
}
#: The five subsets of the paper's Logic domain (§3.2).
PAPER_BBH_TASKS: tuple[str, ...] = (
    "causal_judgement",
    "dyck_languages",
    "formal_fallacies",
    "logical_deduction_seven_objects",
    "tracking_shuffled_objects_seven_objects",
)
BBH_HUB_ID = "lukaemon/bbh"
#: The split that holds the examples, per known Hub copy (a copy without a split of its own reads this one).
BBH_HUB_SPLITS: Mapping[str, str] = {"lukaemon/bbh": "test", "maveriq/bigbenchhard": "train"}
#: The Hub copy read when no ``path`` is given: one config per task.
BBH_HUB = HubCopy(BBH_HUB_ID)


def _check_task(task: str) -> AnswerType:
    try:
        return BBH_ANSWER_TYPES[task]
    except KeyError:
        raise DataError(f"unknown BBH task {task!r}; known: {', '.join(sorted(BBH_ANSWER_TYPES))}") from None


def bbh_problems(
    task: str,
    rows: Iterable[tuple[int, str, Mapping[str, Any]]],
    *,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Problems of one BBH task from ``(index, location, row)`` triples (rows with ``input`` and ``target``)."""
    answer_type = _check_task(task)
    problems = []
    for index, where, row in rows:
        fields = text_fields(row, ("input", "target"), where, skips, strict, numbers=("target",))
        if fields is None:
            continue
        question, target = fields
        answer = target.strip()
        if reason := gold_problem(answer, answer_type):
            reject(reason, where, skips, strict)
            continue
        problems.append(
            Problem(
                domain="logic",
                question=question,
                answer=answer,
                answer_type=answer_type,
                source=f"bbh/{task}",
                metadata={"task": task, "index": index},
                id=f"bbh/{task}/{index}",
            )
        )
    return problems


def load_bbh(
    tasks: str | Sequence[str] = PAPER_BBH_TASKS,
    *,
    path: str | Path | None = None,
    hub: HubCopy = BBH_HUB,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Load BBH tasks as `Problem` lists (domain ``logic``), task by task in the order given.

    ``path`` is a directory holding ``<task>.json`` files (or a single task file when one task is asked
    for); without it the tasks come from the Hub copy ``hub`` (`HubCopy`, by default `BBH_HUB`; without a split,
    the one `BBH_HUB_SPLITS` names for its repository). Its ``loader`` may be any callable
    ``loader(repo, config, split=, revision=)`` returning rows, which is how tests inject a
    ``datasets.Dataset``. Bad rows are counted in ``skips`` (or raise `RowError` when ``strict``).

    >>> from datasets import Dataset
    >>> fake = lambda repo, task, split, revision: Dataset.from_list([{"input": "Q?", "target": "Yes"}])
    >>> [p.id for p in load_bbh("causal_judgement", hub=HubCopy("lukaemon/bbh", loader=fake))]
    ['bbh/causal_judgement/0']
    """
    task_list = [tasks] if isinstance(tasks, str) else list(tasks)
    for task in task_list:
        _check_task(task)
    if path is not None and Path(path).is_file() and len(task_list) != 1:
        raise DataError(f"{path} is a single file but {len(task_list)} tasks were asked for")
    if hub.split is None:
        hub = replace(hub, split=BBH_HUB_SPLITS.get(hub.repo_id, "test"))
    problems: list[Problem] = []
    for task in task_list:
        if path is not None:
            rows: Iterable = read_file_rows(
                task_file(path, task, (f"{task}.json", f"bbh/{task}.json"), "BBH"), skips=skips, strict=strict
            )
        else:
            rows = iter_rows(hub.rows(task), label=hub.label(task), skips=skips, strict=strict)
        problems.extend(bbh_problems(task, rows, skips=skips, strict=strict))
    return problems


def _load(path: str | Path | None, task: str | None, limit: int | None, **options: Any) -> list[Problem]:
    return load_bbh(task or PAPER_BBH_TASKS, path=in_folder(path, "bbh"), **options)[:limit]


BBH = DatasetSpec(
    "BIG-Bench Hard, the paper's five logic subsets (bbh/<task> for one task)",
    _load,
    tuple(BBH_ANSWER_TYPES),
    hub=BBH_HUB,
    options_of=(load_bbh,),
)
