"""What the dataset loaders share: the registry entry each one defines (`DatasetSpec`), the layout of a
local data folder, field access with counted skips and gold-answer checks."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.configs import did_you_mean
from recovery.data.skips import Skips
from recovery.data.sources import DataError, HubCopy, Row, reject
from recovery.grading import (
    clean_answer,
    normalize_choice,
    normalize_choices,
    normalize_dyck,
    normalize_label,
    parse_numeric,
)
from recovery.types import AnswerType, Problem

__all__ = [
    "MISSING",
    "DatasetSpec",
    "check_known",
    "gold_problem",
    "in_folder",
    "reject",
    "task_file",
    "text_field",
    "text_fields",
]


@dataclass(frozen=True)
class DatasetSpec:
    """A problem set runs can name (`recovery.data.registry.DATASETS`): a line about it, its reader, the
    sub-names it takes as ``<name>/<sub>``, the options it takes and, for a set with a Hub copy, where that
    copy is.

    ``read(path, sub, limit, **options)`` returns at most ``limit`` problems (all when None) from ``path``
    (a local file or folder; None: the Hub copy, or nothing for generated sets) and ``sub`` (None for the
    whole set); it rejects a sub-name it does not know with `DataError`. The options it takes are the
    keyword-only parameters of ``read`` and of every function in ``options_of`` (the loader ``read`` passes
    them to), plus the `HubCopy` options when ``hub`` is set; ``check_options(options)``, when set, checks
    more (a value, a set with options of its own). `check` applies both, so a run config fails before any
    work.
    """

    description: str
    read: Callable[..., list[Problem]]
    subsets: tuple[str, ...] = ()
    check_options: Callable[[Mapping[str, Any]], None] | None = None
    hub: HubCopy | None = None
    options_of: tuple[Callable[..., Any], ...] = ()

    def check(self, options: Mapping[str, Any]) -> None:
        """Raise `DataError` (a `ValueError`) naming the first of ``options`` this set cannot honour."""
        if self.options_of:
            known = self.option_names()
            for key in options:
                if key not in known:
                    raise DataError(f"unknown option {key!r}{did_you_mean(key, known, label='options')}")
        if self.hub is not None:
            HubCopy.check_values(options)
        if not isinstance(options.get("skips"), Skips | None):
            raise DataError(f"option 'skips' takes a Skips, not {type(options['skips']).__name__}")
        if self.check_options is not None:
            self.check_options(options)

    def option_names(self) -> list[str]:
        """The options `load` passes on: see the class docstring (``path`` is `load`'s own argument)."""
        loaders = [_keyword_only(function) for function in self.options_of]
        taken = set.intersection(*loaders) if loaders else set()
        taken |= _keyword_only(self.read) | (set(HubCopy.OPTIONS) if self.hub is not None else set())
        return sorted(taken - {"path"})

    def load(self, path: str | Path | None, sub: str | None, limit: int | None, **options: Any) -> list[Problem]:
        """`read`'s problems, after `check`; a set with a Hub copy gets it as ``hub=``, changed by the flat
        options that name its fields (``hub_id``, ``split``, ``revision``, ``loader``: `HubCopy.with_options`)."""
        self.check(options)
        if self.hub is not None:
            options["hub"] = options.get("hub", self.hub).with_options(options)
        return self.read(path, sub, limit, **options)


def _keyword_only(function: Callable[..., Any]) -> set[str]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def in_folder(path: str | Path | None, *names: str) -> Path | None:
    """``path/<name>`` for the first name that exists there (the ``shared/data`` layout), else ``path``."""
    if path is None:
        return None
    base = Path(path).expanduser()
    for name in names:
        if (base / name).exists():
            return base / name
    return base


def task_file(path: str | Path, task: str, names: Sequence[str], collection: str) -> Path:
    """The file of one ``task`` of a collection stored a file per task: ``path`` itself when it is a file,
    else the first of ``names`` (relative to ``path``) that is one; a `DataError` naming the first name and
    the ``collection`` when there is none."""
    path = Path(path).expanduser()
    if path.is_file():
        return path
    for name in names:
        if (path / name).is_file():
            return path / name
    raise DataError(f"{path}: no {names[0]} for {collection} task {task!r}")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: Returned by `text_field` when the row had no usable value (the skip is already counted).
MISSING: Any = _Missing()


def text_field(
    row: Row,
    field: str,
    where: str,
    skips: Skips | None,
    strict: bool,
    *,
    allow_empty: bool = False,
    numbers: bool = False,
) -> str | Any:
    """``row[field]`` as a string, or `MISSING` after counting ``missing_field:<f>`` / ``bad_type:<f>``.

    ``numbers=True`` also accepts ints and floats, turned into text: ids and gold answers are sometimes
    stored as numbers (``"gold": 4``), a response or a model name never is.
    """
    value = row.get(field)
    if value is None or (isinstance(value, str) and not value.strip() and not allow_empty):
        reject(f"missing_field:{field}", where, skips, strict)
        return MISSING
    kinds = (str, int, float) if numbers else (str,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        reject(f"bad_type:{field}", where, skips, strict)
        return MISSING
    return value if isinstance(value, str) else str(value)


def text_fields(
    row: Row, fields: Sequence[str], where: str, skips: Skips | None, strict: bool, *, numbers: Collection[str] = ()
) -> tuple[str, ...] | None:
    """``row``'s ``fields`` as strings (`text_field`; those named in ``numbers`` may be stored as numbers), or
    None when any of them is unusable.

    Every field is read before the row is given up, so a row lacking two fields is counted under both
    reasons.
    """
    values = tuple(text_field(row, name, where, skips, strict, numbers=name in numbers) for name in fields)
    return None if MISSING in values else values


def check_known(names: Iterable[str] | None, known: Collection[str], what: str) -> None:
    """Raise `DataError` when a loader's selection ``names`` (e.g. SciBench books) holds a name not in
    ``known``, naming the unknown ones and listing ``known``: a typo would otherwise select nothing."""
    if names is None:
        return
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise DataError(f"unknown {what} {unknown}; known: {', '.join(known)}")


def gold_problem(answer: str, answer_type: AnswerType) -> str | None:
    """Why ``answer`` cannot serve as a gold answer of ``answer_type`` (a skip reason), or None if it can.

    Uses the same normalisers as `recovery.grading`, so a problem that passes is never graded
    ``UNPARSABLE_GOLD`` later.

    >>> gold_problem("(C)", AnswerType.MULTIPLE_CHOICE), gold_problem("maybe", AnswerType.YES_NO)
    (None, 'gold_not_yes_no')
    """
    answer_type = AnswerType(answer_type)
    text = clean_answer(answer)
    if not text:
        return "gold_empty"
    if answer_type is AnswerType.NUMERIC:
        ok = parse_numeric(text) is not None
    elif answer_type is AnswerType.MULTIPLE_CHOICE:
        ok = normalize_choice(text) is not None
    elif answer_type is AnswerType.MULTI_SELECT:
        ok = normalize_choices(text) is not None
    elif answer_type in (AnswerType.YES_NO, AnswerType.TRUE_FALSE, AnswerType.VALID_INVALID):
        ok = normalize_label(text, answer_type) is not None
    elif answer_type is AnswerType.DYCK:
        ok = normalize_dyck(text) is not None
    else:  # EXPRESSION, EXACT: any non-empty text can be compared
        ok = True
    return None if ok else f"gold_not_{answer_type.value}"
