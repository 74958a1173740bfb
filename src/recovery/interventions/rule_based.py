"""The two neutral interventions that need no LLM (paper §3.1): random characters and Wikipedia text.

Both change only the last prefix step R_k. Under the default protocol all their randomness comes from the
item's private generator (`InterventionContext.rng`), so an item's result does not depend on what else
runs; under ``protocol: reference`` their ``rules`` draw from the trace's batch position instead and write
the prefix back the authors' way (`recovery.interventions.rules`, `.reference`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from recovery.interventions.base import Edit, InterventionContext
from recovery.interventions.characters import (  # noqa: F401 — re-exported: the insertion rule's home
    RANDOM_ALPHABET,
    RANDOM_CHARACTER_RATIO,
    insert_random_characters,
    sample_range,
)
from recovery.interventions.rules import FollowsProtocol
from recovery.interventions.wikipedia import WikipediaPool
from recovery.types import Category


@dataclass(frozen=True)
class RandomCharacters(FollowsProtocol):
    """Neutral: insert round(0.5·|R_k|) random characters into R_k, so they make up one third of it.

    ``Edit.inserted_text`` is the inserted characters only (in order of appearance): its length is what
    length accounting subtracts; the prefix holds them interleaved with R_k. (The authors' ``rules``: the
    whole mutated step.)
    """

    ratio: float = RANDOM_CHARACTER_RATIO
    alphabet: str = RANDOM_ALPHABET

    name: ClassVar[str] = "random_characters"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    edit_kind: ClassVar[str] = "modify_last"

    def __post_init__(self) -> None:
        if self.ratio <= 0:
            raise ValueError(f"ratio must be > 0, got {self.ratio}")
        if not self.alphabet or "\n" in self.alphabet:
            raise ValueError("alphabet must be non-empty and contain no newline")
        super().__post_init__()

    def apply(self, ctx: InterventionContext) -> Edit:
        """Insert the characters into the last prefix step; steps before it are unchanged."""
        new_last, inserted = self.rules.mutated(self, ctx)
        return Edit(self.rules.restored(ctx.prefix_steps[:-1] + (new_last,), ctx), inserted)


@dataclass(frozen=True)
class WikipediaText(FollowsProtocol):
    """Neutral: replace R_k with a paragraph drawn from a `WikipediaPool` (``pool`` may be a path to one).

    ``Edit.inserted_text`` is the paragraph. Under ``protocol: reference`` the pool is a
    `recovery.interventions.reference_text.ReferencePool`, read at the trace's batch position.
    """

    pool: WikipediaPool | str | os.PathLike[str] | None = None

    name: ClassVar[str] = "wikipedia_text"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    needs_pool: ClassVar[bool] = True  # a run gives it ``interventions.wikipedia_pool`` unless ``pool`` is set
    edit_kind: ClassVar[str] = "replace_last"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pool", self.rules.pool(self.pool))  # a path is loaded
        super().__post_init__()

    def apply(self, ctx: InterventionContext) -> Edit:
        """Replace the last prefix step with one pool paragraph."""
        paragraph = self.rules.paragraph(self.pool, ctx)
        return Edit(self.rules.restored(ctx.prefix_steps[:-1] + (paragraph,), ctx), paragraph)
