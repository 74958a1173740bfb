"""`Comparison`: the measured changes between two runs, as `recovery.report.compare` computes them and
`recovery.report.compare_section` renders them (a value object both read, so neither imports the other)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Comparison:
    """The measured changes. Robustness and accuracy are fractions; ``delta``, ``ci_low`` and ``ci_high``
    are points (×100); length rows are in % with changes in points.

    Chain rows (``by_intervention``, ``by_category``, ``by_timestep``, ``by_cell``) hold ``before``,
    ``after`` (over the matched chains), ``delta``, ``ci_low``, ``ci_high``, ``pairs`` and the unmatched
    chains of those cells (``before_only``, ``after_only``) plus their keys. ``overall`` has the same per
    domain with ``majority_`` and ``length_`` prefixes. ``clean`` (the compared runs' own problems) and
    ``clean_runs`` (separate clean-accuracy runs, when given) hold each side's accuracy on all its problems
    with ``n_*`` and a Wilson interval (``before_ci_low`` …), and the change paired over ``pairs`` problems.
    ``cells_left_out``: cells only one run measured (``side`` is that run's label); ``models_left_out``:
    models only one run holds that were not compared.
    """

    labels: tuple[str, str]
    overall: tuple[dict[str, Any], ...]
    by_intervention: tuple[dict[str, Any], ...]
    by_category: tuple[dict[str, Any], ...]
    by_timestep: tuple[dict[str, Any], ...]
    by_cell: tuple[dict[str, Any], ...]
    length: tuple[dict[str, Any], ...]
    clean: tuple[dict[str, Any], ...]
    clean_runs: tuple[dict[str, Any], ...] = ()
    models: tuple[tuple[str, str], ...] = ()
    cells_left_out: tuple[dict[str, Any], ...] = ()
    models_left_out: tuple[dict[str, Any], ...] = ()
    meta: tuple[Mapping[str, Any], Mapping[str, Any]] = field(default_factory=lambda: ({}, {}))
    confidence: float = 0.95
    summary: str = ""
