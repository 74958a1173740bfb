"""The toy world's problems as a dataset: ``toy`` (both families, alternating) or ``toy/<family>``.

They are generated, not read: ``limit`` problems (`DEFAULT_SIZE` without one) of the toy dataset with
``seed`` (`recovery.toy.generate_problems`); the other options are `recovery.toy.ToyTaskConfig` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from recovery.configs import did_you_mean
from recovery.data.common import DatasetSpec
from recovery.toy import FAMILIES, ToyTaskConfig, generate_problems
from recovery.types import Problem

DEFAULT_SIZE = 50


def load_toy(
    path: str | Path | None, family: str | None, limit: int | None, *, seed: int = 0, **options: Any
) -> list[Problem]:
    """The first ``limit`` toy problems of ``seed`` (``path`` is not used: nothing is read)."""
    if family:
        options["families"] = (family,)
    config = ToyTaskConfig(**options) if options else None
    return generate_problems(limit or DEFAULT_SIZE, seed=int(seed), config=config)


def check_toy_options(options: Mapping[str, Any]) -> None:
    """`ValueError` for the first option `load_toy` cannot honour: an unknown key or a bad value."""
    allowed = ["seed", *(f.name for f in fields(ToyTaskConfig))]
    settings = dict(options)
    for key in settings:
        if key not in allowed:
            raise ValueError(f"unknown toy option {key!r}{did_you_mean(key, allowed)}")
    settings.pop("seed", None)
    if "families" in settings:
        settings["families"] = tuple(settings["families"])
    try:
        ToyTaskConfig(**settings)
    except TypeError as err:
        raise ValueError(str(err)) from None


TOY = DatasetSpec(
    "the toy world's generated problems, arithmetic and ball swaps (toy/<family> for one)",
    load_toy,
    FAMILIES,
    check_options=check_toy_options,
)
