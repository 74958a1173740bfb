"""Loading BIG-Bench Mistake items from local ``<task>.jsonl`` files or a Hub copy, row by row validated."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recovery.data.common import task_file
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, iter_rows, read_file_rows, reject

BBM_TASKS: tuple[str, ...] = (
    "dyck_languages",
    "logical_deduction",
    "multistep_arithmetic",
    "tracking_shuffled_objects",
    "word_sorting",
)


@dataclass(frozen=True)
class BBMItem:
    """One BIG-Bench Mistake trace. ``mistake_index`` is 0-based (None: the trace has no mistake)."""

    task: str
    index: int
    question: str
    steps: tuple[str, ...]
    mistake_index: int | None
    answer: str = ""
    target: str = ""

    @property
    def id(self) -> str:
        """``bbm/<task>/<index>``, the item's position in its task file (same on the Hub copy)."""
        return f"bbm/{self.task}/{self.index}"

    @property
    def gold_step(self) -> int | None:
        """The first wrong step as the prompt numbers it (1-based), or None."""
        return None if self.mistake_index is None else self.mistake_index + 1


def bbm_item(
    task: str, index: int, where: str, row: Mapping[str, Any], skips: Skips | None = None, strict: bool = False
) -> BBMItem | None:
    """Validate one row (fields ``input``, ``steps``, ``mistake_index``; ``answer``/``target`` optional).

    A bad row is counted in ``skips`` under a reason (``missing_field:steps``, ``bad_mistake_index``, …)
    and None is returned; with ``strict`` it raises `recovery.data.sources.RowError` naming the row.
    """
    question = row.get("input")
    if not isinstance(question, str) or not question.strip():
        reject("missing_field:input", where, skips, strict)
        return None
    steps = row.get("steps")
    if isinstance(steps, str):  # some Hub exports store lists as JSON text
        try:
            steps = json.loads(steps)
        except json.JSONDecodeError:
            steps = None
    if not isinstance(steps, (list, tuple)) or not steps or not all(isinstance(s, str) for s in steps):
        reject("missing_field:steps", where, skips, strict)
        return None
    if "mistake_index" not in row:
        reject("missing_field:mistake_index", where, skips, strict)
        return None
    mistake = row["mistake_index"]
    if isinstance(mistake, float) and mistake.is_integer():  # Parquet/pandas turn nullable ints into floats
        mistake = int(mistake)
    if mistake is not None and (
        isinstance(mistake, bool) or not isinstance(mistake, int) or not 0 <= mistake < len(steps)
    ):
        reject("bad_mistake_index", f"{where} (mistake_index={mistake!r}, {len(steps)} steps)", skips, strict)
        return None
    return BBMItem(
        task, index, question, tuple(steps), mistake, str(row.get("answer") or ""), str(row.get("target") or "")
    )


def load_bbm(
    tasks: str | Sequence[str] = BBM_TASKS,
    *,
    path: str | Path | None = None,
    hub: HubCopy | None = None,
    task_column: str | None = None,
    limit: int | None = None,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[BBMItem]:
    """BIG-Bench Mistake items, task by task in the order given (at most ``limit`` per task, file order).

    ``path``: a folder of ``<task>.jsonl`` files (or one file when one task is asked for). Otherwise the Hub
    copy ``hub`` (`HubCopy`, its split defaulting to ``train``): one config per task, or, with
    ``task_column``, one table whose column names the task. Bad rows are counted in ``skips``.
    """
    task_list = [tasks] if isinstance(tasks, str) else list(tasks)
    if not task_list:
        raise DataError("no BIG-Bench Mistake task asked for")
    if (path is None) == (hub is None):
        raise DataError("give exactly one of path (local <task>.jsonl files) and hub (a Hub dataset)")
    if hub is not None and hub.split is None:
        hub = replace(hub, split="train")
    if path is not None and Path(path).is_file() and len(task_list) != 1:
        raise DataError(f"{path} is a single file but {len(task_list)} tasks were asked for")
    shared_rows: list[Any] | None = None
    items: list[BBMItem] = []
    for task in task_list:
        if path is not None:
            rows: Iterable = read_file_rows(
                task_file(path, task, [f"{task}.{ext}" for ext in ("jsonl", "json", "parquet")], "BIG-Bench Mistake"),
                skips=skips,
                strict=strict,
            )
        elif task_column:
            if shared_rows is None:
                shared_rows = list(hub.rows())
            mine = [r for r in shared_rows if isinstance(r, Mapping) and r.get(task_column) == task]
            rows = iter_rows(mine, label=f"{hub.label()} {task_column}={task}", skips=skips, strict=strict)
        else:
            rows = iter_rows(hub.rows(task), label=hub.label(task), skips=skips, strict=strict)
        count = 0
        for index, where, row in rows:
            if limit is not None and count >= limit:
                break
            item = bbm_item(task, index, where, row, skips, strict)
            if item is not None:
                items.append(item)
                count += 1
    return items
