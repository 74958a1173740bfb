"""GeneralThoughts (General Reasoning, 2025): which problems a reference model solved (paper §3.2).

The paper's Math problems are the NuminaMath olympiads with numeric answers "that DeepSeek-R1 671B solved
correctly, using traces from GeneralThoughts". The source is ``GeneralReasoning/GeneralThought-430K`` on the
Hub (split ``train``), or a local JSONL/JSON/Parquet dump in its schema: one row per (question, model
response), with the columns read here

* ``question`` — the problem text;
* ``model_name`` — the model that answered (e.g. ``DeepSeek-R1``, possibly with an owner prefix);
* ``verifier_score`` — the source's verdict on the answer (1 when correct; missing when not verified).

(``reference_answer``, ``model_answer``, ``model_reasoning`` and the rest are not needed.)

`load_reference_solutions` reads the rows of one model into `ReferenceSolutions`: per normalised question,
whether any of that model's rows scored 1 (a question it answered several times counts as solved when one
answer was verified). `keep_reference_solved` keeps the problems solved so, counting the others as
``reference_not_solved`` (the model answered, never verified correct) or ``reference_no_trace`` (no row of
the model for that question). Questions are matched on their text, normalised by `normalize_question`
(Unicode NFKC, whitespace collapsed), since the two datasets share no id.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from recovery.data.filters import FilterResult
from recovery.data.skips import Skips
from recovery.data.sources import HubCopy, Row, file_memory_or_hub_rows, reject
from recovery.types import Problem

__all__ = [
    "GENERAL_THOUGHTS_HUB_ID",
    "GENERAL_THOUGHTS_HUB",
    "NOT_SOLVED",
    "NO_TRACE",
    "ReferenceSolutions",
    "keep_reference_solved",
    "load_reference_solutions",
    "model_matches",
    "normalize_question",
]

GENERAL_THOUGHTS_HUB_ID = "GeneralReasoning/GeneralThought-430K"
#: The Hub copy read when neither ``path`` nor ``dataset`` is given.
GENERAL_THOUGHTS_HUB = HubCopy(GENERAL_THOUGHTS_HUB_ID, "train")
NOT_SOLVED = "reference_not_solved"
NO_TRACE = "reference_no_trace"
_COLUMNS = ("question", "model_name", "verifier_score")


def normalize_question(text: str) -> str:
    """The text two datasets' copies of one question share: NFKC, whitespace runs as one space, stripped.

    >>> normalize_question(" What is\\n\\n2 + 2?  ") == normalize_question("What is 2 + 2?")
    True
    """
    return " ".join(unicodedata.normalize("NFKC", text).split())


def model_matches(model_name: object, model: str) -> bool:
    """Whether the source's ``model_name`` names ``model``: equal, or its last ``/`` part equal, ignoring case.

    >>> model_matches("DeepSeek/DeepSeek-R1", "DeepSeek-R1"), model_matches("DeepSeek-R1-Zero", "DeepSeek-R1")
    (True, False)
    """
    if not isinstance(model_name, str):
        return False
    wanted = model.casefold()
    return model_name.casefold() == wanted or model_name.rsplit("/", 1)[-1].casefold() == wanted


@dataclass
class ReferenceSolutions:
    """What one model did in the source: normalised question → whether one of its answers scored 1."""

    model: str
    solved: dict[str, bool] = field(default_factory=dict)
    skips: Skips = field(default_factory=Skips)  # the source's rows that could not be read

    def add(self, question: str, score: object) -> None:
        key = normalize_question(question)
        correct = not isinstance(score, bool) and isinstance(score, (int, float)) and score == 1
        self.solved[key] = self.solved.get(key, False) or correct

    def status(self, question: str) -> str | None:
        """None when the model solved ``question``, else why not (`NOT_SOLVED` or `NO_TRACE`)."""
        solved = self.solved.get(normalize_question(question))
        if solved is None:
            return NO_TRACE
        return None if solved else NOT_SOLVED


def reference_solutions(
    rows: Iterable[tuple[int, str, Row]], *, model: str, skips: Skips | None = None, strict: bool = False
) -> ReferenceSolutions:
    """`ReferenceSolutions` of ``model`` from ``(index, location, row)`` triples in the source's schema; rows of
    other models are passed over, rows of ``model`` without a question are counted (``missing_field:question``)."""
    out = ReferenceSolutions(model, skips=skips if skips is not None else Skips())
    for _, where, row in rows:
        if not model_matches(row.get("model_name"), model):
            continue
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            reject("missing_field:question", where, out.skips, strict)
            continue
        out.add(question, row.get("verifier_score"))
    return out


def load_reference_solutions(
    *,
    model: str = "DeepSeek-R1",
    path: str | Path | None = None,
    dataset: Iterable[Mapping[str, Any]] | None = None,
    hub: HubCopy = GENERAL_THOUGHTS_HUB,
    skips: Skips | None = None,
    strict: bool = False,
) -> ReferenceSolutions:
    """Read which questions ``model`` solved: from ``path`` (JSONL/JSON/Parquet), ``dataset`` (rows in memory)
    or else the Hub copy ``hub`` (`HubCopy`, by default `GENERAL_THOUGHTS_HUB`). A Hub dataset is
    narrowed to the three columns read and to ``model``'s rows before any row reaches Python."""
    narrow = partial(_read_columns_of, model=model)
    rows = file_memory_or_hub_rows(path, dataset, hub, skips=skips, strict=strict, narrow=narrow)
    return reference_solutions(rows, model=model, skips=skips, strict=strict)


def _read_columns_of(data: Any, model: str) -> Any:
    """``data`` narrowed, when it is a ``datasets.Dataset``, to the columns read and to ``model``'s rows, before
    any row reaches Python; else ``data`` as it is."""
    columns = getattr(data, "column_names", None) or ()
    if hasattr(data, "select_columns") and set(_COLUMNS) <= set(columns):
        data = data.select_columns(list(_COLUMNS))
    if hasattr(data, "filter") and "model_name" in columns:
        data = data.filter(
            lambda names: [model_matches(n, model) for n in names], input_columns="model_name", batched=True
        )
    return data


def keep_reference_solved(problems: Iterable[Problem], solutions: ReferenceSolutions) -> FilterResult[Problem]:
    """The problems ``solutions.model`` solved, in input order; the others counted by reason (`NOT_SOLVED`,
    `NO_TRACE`) with the problem ids as examples."""
    kept, skips = [], Skips(max_examples=None)
    for problem in problems:
        reason = solutions.status(problem.question)
        if reason is None:
            kept.append(problem)
        else:
            skips.add(reason, problem.id)
    return FilterResult(kept, skips)
