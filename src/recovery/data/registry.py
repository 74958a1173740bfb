"""`load_problems(name, path=..., **options)`: one entry point for every problem set, by name.

Names (`DATASETS` lists them with a line each):

* ``bbh`` — the paper's five BBH subsets; ``bbh/<task>`` — one task (any of the 27);
* ``scibench``, ``scibench/<book>``;
* ``jeebench``, ``jeebench/numeric`` (Integer + Numeric, 219 questions);
* ``numina_olympiads``;
* ``real_traces`` — the problems of an imported real-trace dump (needs ``path``);
* ``logic`` / ``science`` — the paper's domains: BBH five; SciBench + JEEBench (with ``path``, a folder
  holding ``scibench/`` and ``jeebench/`` as in ``shared/data``).

``path`` is a local file or folder (the layouts of ``shared/data`` are understood: for ``bbh`` the folder
with ``<task>.json``, for ``scibench`` the folder ``scibench/`` or its ``original/``, for ``jeebench`` the
folder or ``dataset.json``); without it the Hub copy is used. Other keyword arguments go to the loader
(``loader=``, ``revision=``, ``skips=``, ``strict=``, ``tolerance=`` …).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from recovery.data.bbh import BBH_ANSWER_TYPES, PAPER_BBH_TASKS, load_bbh
from recovery.data.jeebench import NUMERIC_TYPES, load_jeebench
from recovery.data.numina import load_numina_olympiads
from recovery.data.scibench import SCIBENCH_BOOKS, load_scibench
from recovery.data.skips import Skips
from recovery.data.sources import DataError
from recovery.data.traces import load_real_traces
from recovery.types import Problem

__all__ = ["DATASETS", "load_problems", "dataset_names"]

#: Base name → one-line description.
DATASETS: Mapping[str, str] = {
    "bbh": "BIG-Bench Hard, the paper's five logic subsets (bbh/<task> for one task)",
    "scibench": "SciBench textbook problems, 692 (scibench/<book> for one book)",
    "jeebench": "JEEBench, 515 questions (jeebench/numeric: the 219 Integer/Numeric ones)",
    "numina_olympiads": "NuminaMath-CoT olympiads with numeric answers, ≤20 per answer (Hub or local dump)",
    "real_traces": "problems of the real DeepSeek-R1-Distill traces in shared/data/real_traces (needs path)",
    "logic": "the paper's Logic domain: the five BBH subsets",
    "science": "the paper's Science domain: SciBench + JEEBench",
}


def dataset_names() -> list[str]:
    """Every accepted name, sub-names included."""
    names = list(DATASETS)
    names += [f"bbh/{task}" for task in BBH_ANSWER_TYPES]
    names += [f"scibench/{book}" for book in SCIBENCH_BOOKS]
    names += ["jeebench/numeric"]
    return names


def _sub(path: str | Path | None, *names: str) -> Path | None:
    """``path/<name>`` for the first existing name (shared/data layout), else ``path`` itself."""
    if path is None:
        return None
    base = Path(path).expanduser()
    for name in names:
        if (base / name).exists():
            return base / name
    return base


def _bbh(path: str | Path | None, task: str | None, **kw: Any) -> list[Problem]:
    return load_bbh(task or PAPER_BBH_TASKS, path=_sub(path, "bbh"), **kw)


def _scibench(path: str | Path | None, book: str | None, **kw: Any) -> list[Problem]:
    if book is not None:
        kw["books"] = [book]
    return load_scibench(path=_sub(path, "scibench"), **kw)


def _jeebench(path: str | Path | None, sub: str | None, **kw: Any) -> list[Problem]:
    if sub == "numeric":
        kw["types"] = NUMERIC_TYPES
    elif sub is not None:
        raise DataError(f"unknown JEEBench subset {sub!r}; known: numeric")
    return load_jeebench(path=_sub(path, "jeebench"), **kw)


def _numina(path: str | Path | None, sub: str | None, **kw: Any) -> list[Problem]:
    if sub is not None:
        raise DataError(f"numina_olympiads has no subsets (got {sub!r})")
    return load_numina_olympiads(path=path, **kw)


def _real(path: str | Path | None, sub: str | None, *, skips: Skips | None = None, **kw: Any) -> list[Problem]:
    if path is None:
        raise DataError("real_traces has no Hub copy: pass path= (shared/data or shared/data/real_traces)")
    imported = load_real_traces(_sub(path, "real_traces"), **kw)
    if skips is not None:
        skips.update(imported.skips)
    return imported.problems


def _logic(path: str | Path | None, sub: str | None, **kw: Any) -> list[Problem]:
    return _bbh(path, None, **kw)


def _science(path: str | Path | None, sub: str | None, **kw: Any) -> list[Problem]:
    return _scibench(path, None, **kw) + _jeebench(path, None, **kw)


_LOADERS: Mapping[str, Callable[..., list[Problem]]] = {
    "bbh": _bbh,
    "scibench": _scibench,
    "jeebench": _jeebench,
    "numina_olympiads": _numina,
    "real_traces": _real,
    "logic": _logic,
    "science": _science,
}


def load_problems(name: str, *, path: str | Path | None = None, **options: Any) -> list[Problem]:
    """Load a problem set by name (see the module docstring), from ``path`` or else from the Hub.

    >>> load_problems("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recovery.data.sources.DataError: unknown dataset 'nope'; known: bbh, scibench, jeebench, ...
    """
    base, _, sub = name.strip().partition("/")
    if base not in _LOADERS:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if base == "science" and "tolerance" in options:
        raise DataError("tolerance= applies to SciBench only: load 'scibench' and 'jeebench' separately")
    return _LOADERS[base](path, sub or None, **options)
