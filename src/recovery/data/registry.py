"""`load_problems(name, path=..., limit=..., **options)`: one entry point for every problem set, by name.

`DATASETS` (a `recovery.registry.Registry`) maps each name to its `DatasetSpec`, defined beside its loader; a
new dataset is its module (loader and spec) plus one line here, or one ``DATASETS[name] = spec`` statement
in a plug-in. Names:

* ``bbh`` — the paper's five BBH subsets; ``bbh/<task>`` — one task (any of the 27);
* ``scibench``, ``scibench/<book>``;
* ``jeebench``, ``jeebench/numeric`` (Integer + Numeric, 219 questions);
* ``numina_olympiads``;
* ``real_traces`` — the problems of an imported real-trace dump (needs ``path``);
* ``logic`` / ``science`` — the paper's domains: BBH five; SciBench + JEEBench (with ``path``, a folder
  holding ``scibench/`` and ``jeebench/`` as in ``shared/data``);
* ``toy``, ``toy/<family>`` — the toy world's generated problems (options: ``seed`` and the task sizes).

``path`` is a local file or folder (the layouts of ``shared/data`` are understood: for ``bbh`` the folder
with ``<task>.json``, for ``scibench`` the folder ``scibench/`` or its ``original/``, for ``jeebench`` the
folder or ``dataset.json``); without it the Hub copy is used. ``limit`` keeps the first problems. Other
keyword arguments go to the loader (``loader=``, ``revision=``, ``skips=``, ``strict=``, ``tolerance=`` …).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recovery.data.bbh import BBH
from recovery.data.common import DatasetSpec
from recovery.data.jeebench import JEEBENCH
from recovery.data.numina import NUMINA_OLYMPIADS
from recovery.data.scibench import SCIBENCH
from recovery.data.sources import DataError
from recovery.data.toy import TOY
from recovery.data.traces import REAL_TRACES
from recovery.registry import Registry
from recovery.types import Problem

__all__ = ["DATASETS", "load_problems", "dataset_names"]


def _logic(path: str | Path | None, sub: str | None, limit: int | None, **options: Any) -> list[Problem]:
    return BBH.load(path, None, limit, **options)


def _science(path: str | Path | None, sub: str | None, limit: int | None, **options: Any) -> list[Problem]:
    # `DatasetSpec.load` ran `_check_science` on the options before calling this; each set's own `load` (which
    # checks them again, cheaply) applies them to its Hub copy.
    return (SCIBENCH.load(path, None, None, **options) + JEEBENCH.load(path, None, None, **options))[:limit]


def _check_science(options: Mapping[str, Any]) -> None:
    """The Science domain passes its options to both sets: each must take them."""
    if "tolerance" in options:
        raise DataError("tolerance= applies to SciBench only: load 'scibench' and 'jeebench' separately")
    for name, spec in (("scibench", SCIBENCH), ("jeebench", JEEBENCH)):
        try:
            spec.check(options)
        except DataError as err:
            raise DataError(f"{name}, part of the Science domain: {err}") from None


DATASETS: Registry[DatasetSpec] = Registry(
    "dataset",
    {
        "bbh": BBH,
        "scibench": SCIBENCH,
        "jeebench": JEEBENCH,
        "numina_olympiads": NUMINA_OLYMPIADS,
        "real_traces": REAL_TRACES,
        "logic": DatasetSpec("the paper's Logic domain: the five BBH subsets", _logic, check_options=BBH.check),
        "science": DatasetSpec(
            "the paper's Science domain: SciBench + JEEBench", _science, check_options=_check_science
        ),
        "toy": TOY,
    },
    error=DataError,
)


def dataset_names() -> list[str]:
    """Every accepted name, sub-names included."""
    names = list(DATASETS)
    names += [f"{name}/{sub}" for name, spec in DATASETS.items() for sub in spec.subsets]
    return names


def load_problems(
    name: str, *, path: str | Path | None = None, limit: int | None = None, **options: Any
) -> list[Problem]:
    """Load a problem set by name (see the module docstring), from ``path`` or else from the Hub.

    >>> load_problems("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recovery.data.sources.DataError: unknown dataset 'nope'; known datasets: bbh, jeebench, logic, ...
    """
    base, _, sub = name.strip().partition("/")
    if base not in DATASETS:
        raise DataError(DATASETS.unknown(name))
    return DATASETS[base].load(path, sub or None, limit, **options)
