"""JEEBench (Arora, Singh, Mausam; EMNLP 2023): part of the paper's Science domain (§3.2).

Sources: ``data/dataset.json`` of github.com/dair-iitd/jeebench (515 questions, JEE Advanced 2016–2023),
or the Hub copy ``daman1209arora/jeebench`` (split ``test``). Fields: ``description`` (the exam sitting,
e.g. "JEE Adv 2016 Paper 1"), ``index`` (question number in that paper), ``subject`` (phy/chem/math),
``type`` (MCQ / MCQ(multiple) / Integer / Numeric), ``question``, ``gold``.

Answer types: MCQ → multiple choice, MCQ(multiple) → multi-select (the exact set of letters, JEEBench's
full-credit case), Integer and Numeric → numeric with ``abs_tol=0.01`` in the metadata, as the official
scorer does (``compute_metrics.py::compute_score``: ``abs(gold - response) <= 0.01``).

With ``instructions=True`` (default) the question starts with the official per-type instruction of
``inference.py::prompt_library`` (verbatim, typo included) — it is what tells a model that several options
may be correct — and the question text is compacted the way ``inference.py`` does
(``question.replace("\\n\\n", "\\n").strip()``).

Ids are ``jeebench/<year>/<paper>/<index>`` (e.g. ``jeebench/2016/p1/3``) from description and index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from recovery.data.common import DatasetSpec, check_known, gold_problem, in_folder, reject, text_fields
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, memory_or_hub_rows, read_file_rows
from recovery.types import AnswerType, Problem

__all__ = [
    "JEEBENCH_HUB_ID",
    "JEEBENCH_HUB",
    "JEEBENCH_TYPES",
    "JEEBENCH_INSTRUCTIONS",
    "NUMERIC_TYPES",
    "JEEBENCH_ABS_TOL",
    "load_jeebench",
    "jeebench_problems",
]

JEEBENCH_HUB_ID = "daman1209arora/jeebench"
#: The Hub copy read when neither ``path`` nor ``dataset`` is given.
JEEBENCH_HUB = HubCopy(JEEBENCH_HUB_ID, "test")
JEEBENCH_TYPES: Mapping[str, AnswerType] = {
    "MCQ": AnswerType.MULTIPLE_CHOICE,
    "MCQ(multiple)": AnswerType.MULTI_SELECT,
    "Integer": AnswerType.NUMERIC,
    "Numeric": AnswerType.NUMERIC,
}
NUMERIC_TYPES: tuple[str, ...] = ("Integer", "Numeric")
#: compute_metrics.py::compute_score: an Integer/Numeric response scores iff abs(gold - response) <= 0.01.
JEEBENCH_ABS_TOL = 0.01
#: inference.py::prompt_library, verbatim.
JEEBENCH_INSTRUCTIONS: Mapping[str, str] = {
    "MCQ": "In this problem, only one option will be correct. Give a detailed solution and end the solution "
    "with the final answer.",
    "MCQ(multiple)": "In this problem, multiple options can be correct. Give a detailed solution and end the "
    "solution with the final answer.",
    "Integer": "In this problem, the final answer will be a non-negative integer. Give a detailed solution and "
    "end the solution with the final answer.",
    "Numeric": "In this problem, the final will be a numeric value. Give the numerical answer correct upto the "
    "2nd decimal digit. Give a detailed solution and end the solution with the final answer.",
}
_SUBJECTS = {"phy": "physics", "chem": "chemistry", "math": "math"}
_SITTING = re.compile(r"(\d{4})\D*?paper\s*(\d+)", re.IGNORECASE)


def _sitting(description: str, index: Any) -> str:
    match = _SITTING.search(description)
    if match:
        return f"{match.group(1)}/p{match.group(2)}/{index}"
    slug = re.sub(r"[^a-z0-9]+", "_", description.lower()).strip("_") or "unknown"
    return f"{slug}/{index}"


def jeebench_problems(
    rows: Iterable[tuple[int, str, Mapping[str, Any]]],
    *,
    types: Sequence[str] | None = None,
    subjects: Sequence[str] | None = None,
    instructions: bool = True,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Problems from ``(index, location, row)`` triples of JEEBench rows (see the module docstring)."""
    problems = []
    for position, where, row in rows:
        fields = text_fields(row, ("question", "gold", "type"), where, skips, strict, numbers=("gold",))
        if fields is None:
            continue
        question, gold, qtype = fields
        qtype = qtype.strip()
        if qtype not in JEEBENCH_TYPES:
            reject("unknown_type", where, skips, strict)
            continue
        subject_raw = str(row.get("subject") or "").strip()
        if types is not None and qtype not in types:
            continue
        if subjects is not None and subject_raw not in subjects and _SUBJECTS.get(subject_raw) not in subjects:
            continue
        answer_type = JEEBENCH_TYPES[qtype]
        answer = gold.strip()
        if reason := gold_problem(answer, answer_type):
            reject(reason, where, skips, strict)
            continue
        description = str(row.get("description") or "").strip()
        number = row.get("index", position)
        text = question.replace("\n\n", "\n").strip() if instructions else question
        if instructions:
            text = f"{JEEBENCH_INSTRUCTIONS[qtype]}\n\n{text}"
        metadata: dict[str, Any] = {
            "subject": _SUBJECTS.get(subject_raw, subject_raw),
            "subject_code": subject_raw,
            "type": qtype,
            "description": description,
            "index": number,
        }
        if answer_type is AnswerType.NUMERIC:
            metadata.update(rel_tol=0.0, abs_tol=JEEBENCH_ABS_TOL)
        problems.append(
            Problem(
                domain="science",
                question=text,
                answer=answer,
                answer_type=answer_type,
                source="jeebench",
                metadata=metadata,
                id=f"jeebench/{_sitting(description, number)}",
            )
        )
    return problems


def load_jeebench(
    *,
    path: str | Path | None = None,
    dataset: Iterable[Mapping[str, Any]] | None = None,
    types: Sequence[str] | None = None,
    subjects: Sequence[str] | None = None,
    instructions: bool = True,
    hub: HubCopy = JEEBENCH_HUB,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Load JEEBench (domain ``science``).

    ``path``: ``dataset.json`` (or a folder holding it, e.g. the repository's ``data/``); without it the rows
    of ``dataset`` (e.g. a ``datasets.Dataset`` in memory), else the Hub copy ``hub`` (`HubCopy`, by default
    `JEEBENCH_HUB`). ``types`` keeps some question
    types (`NUMERIC_TYPES` for the numeric-answer subset); ``subjects`` some subjects (``phy``/``physics``,
    ``chem``/``chemistry``, ``math``).
    """
    check_known(types, JEEBENCH_TYPES, "JEEBench type(s)")
    if path is None:
        rows = memory_or_hub_rows(dataset, hub, skips=skips, strict=strict)
    else:
        file = Path(path).expanduser()
        if file.is_dir():
            candidates = [file / "dataset.json", file / "data" / "dataset.json"]
            file = next((c for c in candidates if c.is_file()), candidates[0])
        rows = read_file_rows(file, skips=skips, strict=strict)
    return jeebench_problems(
        rows, types=types, subjects=subjects, instructions=instructions, skips=skips, strict=strict
    )


def _load(path: str | Path | None, sub: str | None, limit: int | None, **options: Any) -> list[Problem]:
    if sub == "numeric":
        options["types"] = NUMERIC_TYPES
    elif sub is not None:
        raise DataError(f"unknown JEEBench subset {sub!r}; known: numeric")
    return load_jeebench(path=in_folder(path, "jeebench"), **options)[:limit]


JEEBENCH = DatasetSpec(
    "JEEBench, 515 questions (jeebench/numeric: the 219 Integer/Numeric ones)",
    _load,
    ("numeric",),
    hub=JEEBENCH_HUB,
    options_of=(load_jeebench,),
)
