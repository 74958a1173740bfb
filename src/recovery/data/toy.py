"""The toy world's problems as a dataset: ``toy`` (both families, alternating) or ``toy/<family>``.

They are generated, not read: ``limit`` problems (`DEFAULT_SIZE` without one) of the toy dataset with
``seed`` (`recovery.toy.generate_problems`); the other options are `recovery.toy.ToyTaskConfig` fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


TOY = DatasetSpec(
    "the toy world's generated problems, arithmetic and ball swaps (toy/<family> for one)", load_toy, FAMILIES
)
