"""NuminaMath olympiads (Li et al., 2024): the paper's Math domain (§3.2).

Source: ``AI-MO/NuminaMath-CoT`` on the Hub (split ``train``; columns ``source``, ``problem``, ``solution``,
``messages``), rows with ``source == "olympiads"``; or a local JSONL/JSON/Parquet dump in that schema.

Selection (§3.2):

1. the reference answer is the last ``\\boxed{}`` of ``solution`` (rows without one are skipped);
2. keep only numerically parsable answers — the paper keeps problems "where the reference answer can be
   parsed as a floating-point number or integer". ``numeric="float"`` (default) reads that literally: the
   boxed text must be a plain decimal literal (``12``, ``-3.5``, ``1e-3``; no fractions, units or
   thousands separators). ``numeric="grading"`` accepts whatever `recovery.grading.parse_numeric` reads as
   one number (``\\frac{1}{2}``, ``50\\%``, ``12 \\text{cm}``, ``1{,}000``);
3. at most ``per_answer_cap`` problems (default 20) per distinct answer *value* (``2`` and ``2.0`` are one
   answer), the first ones in dataset order, because a few answers dominate (the paper: the 20 most
   common answers cover 52.78 % of responses). In the paper this cap comes after the "solved by every
   model" selection; pass ``per_answer_cap=None`` here and apply `recovery.data.filters.cap_per_answer`
   later to reproduce that order.

Repeated problem texts are kept once. Ids are ``numina_olympiads/<16 hex>`` from the problem text, so
they do not depend on the dataset revision or on how a local dump was filtered (``metadata["index"]`` is
only the position among the rows read, after the source filter on a Hub dataset).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

from recovery.data.common import DatasetSpec, reject, text_fields
from recovery.data.filters import cap_per_answer
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, Row, file_memory_or_hub_rows
from recovery.grading import last_boxed, parse_numeric
from recovery.ids import content_id
from recovery.types import AnswerType, Problem

__all__ = [
    "NUMINA_HUB_ID",
    "NUMINA_HUB",
    "NUMINA_SOURCE",
    "DEFAULT_PER_ANSWER_CAP",
    "load_numina_olympiads",
    "numina_problems",
    "numeric_answer",
]

NUMINA_HUB_ID = "AI-MO/NuminaMath-CoT"
#: The Hub copy read when neither ``path`` nor ``dataset`` is given.
NUMINA_HUB = HubCopy(NUMINA_HUB_ID, "train")
NUMINA_SOURCE = "olympiads"
DEFAULT_PER_ANSWER_CAP = 20
_FLOAT_LITERAL = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def numeric_answer(text: str, mode: Literal["float", "grading"] = "float") -> str | None:
    """Why ``text`` is not a numeric answer under ``mode`` (a skip reason), or None when it is.

    >>> numeric_answer("42"), numeric_answer("\\\\frac{1}{2}"), numeric_answer("\\\\frac{1}{2}", "grading")
    (None, 'answer_not_numeric', None)
    """
    stripped = text.strip()
    if mode == "float":
        ok = bool(_FLOAT_LITERAL.fullmatch(stripped)) and parse_numeric(stripped) is not None
    elif mode == "grading":
        ok = parse_numeric(stripped) is not None
    else:
        raise ValueError(f"numeric mode must be 'float' or 'grading', got {mode!r}")
    return None if ok else "answer_not_numeric"


def numina_problems(
    rows: Iterable[tuple[int, str, Row]],
    *,
    source: str | None = NUMINA_SOURCE,
    numeric: Literal["float", "grading"] = "float",
    per_answer_cap: int | None = DEFAULT_PER_ANSWER_CAP,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Problems from ``(index, location, row)`` triples in the NuminaMath-CoT schema (see module docstring).

    Rows of another ``source`` are passed over silently (they are not errors); ``source=None`` keeps all.
    """
    if per_answer_cap is not None and per_answer_cap < 1:
        raise ValueError(f"per_answer_cap must be ≥ 1 or None, got {per_answer_cap!r}")
    numeric_answer("0", numeric)  # validate the mode before reading anything
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, where, row in rows:
        if source is not None and row.get("source") != source:
            continue
        fields = text_fields(row, ("problem", "solution"), where, skips, strict)
        if fields is None:
            continue
        question, solution = fields
        boxed = last_boxed(solution)
        if boxed is None or not boxed.strip():
            reject("no_boxed_answer", where, skips, strict)
            continue
        answer = boxed.strip()
        if reason := numeric_answer(answer, numeric):
            reject(reason, where, skips, strict)
            continue
        problem_id = f"numina_olympiads/{content_id('numina', question.strip())}"
        if problem_id in seen:
            reject("duplicate_problem", where, skips, strict=False)  # a repeat is not an error
            continue
        seen.add(problem_id)
        problems.append(
            Problem(
                domain="math",
                question=question,
                answer=answer,
                answer_type=AnswerType.NUMERIC,
                source="numina_olympiads",
                metadata={"numina_source": row.get("source"), "index": index},
                id=problem_id,
            )
        )
    if per_answer_cap is None:
        return problems
    capped = cap_per_answer(problems, cap=per_answer_cap)
    if skips is not None:
        skips.update(capped.skips)
    return capped.kept


def _of_source(data: Any, source: str | None) -> Any:
    """``data`` narrowed to the rows of ``source`` by a batched column filter when it is a ``datasets.Dataset``
    with a ``source`` column (much faster than testing 860k rows in Python), else ``data`` as it is."""
    if source is not None and hasattr(data, "filter") and "source" in (getattr(data, "column_names", None) or ()):
        return data.filter(lambda batch: [s == source for s in batch], input_columns="source", batched=True)
    return data


def load_numina_olympiads(
    *,
    path: str | Path | None = None,
    dataset: Iterable[Mapping[str, Any]] | None = None,
    source: str | None = NUMINA_SOURCE,
    numeric: Literal["float", "grading"] = "float",
    per_answer_cap: int | None = DEFAULT_PER_ANSWER_CAP,
    hub: HubCopy = NUMINA_HUB,
    skips: Skips | None = None,
    strict: bool = False,
) -> list[Problem]:
    """Load the NuminaMath olympiads problems with numeric answers (domain ``math``, numeric answers).

    Reads ``path`` (JSONL/JSON/Parquet in the Hub schema), or ``dataset`` (rows already in memory, e.g. a
    ``datasets.Dataset``), or else the Hub copy ``hub`` (`HubCopy`: by default ``datasets.load_dataset`` of
    `NUMINA_HUB`; the full train split is ≈2.5 GB). A ``datasets.Dataset`` is first narrowed
    to ``source`` with a batched column filter, which is much faster than testing 860k rows in Python.
    """
    narrow = partial(_of_source, source=source)
    rows = file_memory_or_hub_rows(path, dataset, hub, skips=skips, strict=strict, narrow=narrow)
    return numina_problems(
        rows, source=source, numeric=numeric, per_answer_cap=per_answer_cap, skips=skips, strict=strict
    )


def _load(path: str | Path | None, sub: str | None, limit: int | None, **options: Any) -> list[Problem]:
    if sub is not None:
        raise DataError(f"numina_olympiads has no subsets (got {sub!r})")
    return load_numina_olympiads(path=path, **options)[:limit]


NUMINA_OLYMPIADS = DatasetSpec(
    "NuminaMath-CoT olympiads with numeric answers, ≤20 per answer (Hub or local dump)",
    _load,
    hub=NUMINA_HUB,
    options_of=(load_numina_olympiads,),
)
