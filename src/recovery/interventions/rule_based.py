"""The two neutral interventions that need no LLM (paper §3.1): random characters and Wikipedia text.

Both change only the last prefix step R_k and draw all randomness from the item's private generator
(`InterventionContext.rng`), so an item's result does not depend on what else runs.
"""

from __future__ import annotations

import math
import os
import random
import string
from dataclasses import dataclass
from typing import ClassVar

from recovery.interventions.base import Edit, InterventionContext, InterventionFailed
from recovery.interventions.cleaning import FailureReason
from recovery.interventions.wikipedia import WikipediaPool
from recovery.types import Category

# Letters, digits, punctuation and space (reference implementation). No newline: inserted characters must
# never create a blank line, which would change the step segmentation.
RANDOM_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " "
RANDOM_CHARACTER_RATIO = 0.5  # round(0.5·|R_k|) inserted → one third of the resulting step


def sample_range(rng: random.Random, n: int, k: int) -> list[int]:
    """``rng.sample(range(n), k)``: the same values, drawn from the generator the same way (so its state
    afterwards is the same too), without a Python call per draw: this runs for every random-characters
    chain. It follows CPython's `random.Random.sample` (a pool for small populations, a set of taken
    values otherwise); tested equal to it. Generators of other classes use their own ``sample``.
    """
    if type(rng) is not random.Random or not 0 <= k <= n:
        return rng.sample(range(n), k)
    getrandbits = rng.getrandbits
    setsize = 21  # CPython's choice between the two methods, kept so the draws are the same
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    result: list[int] = []
    if n <= setsize:
        pool = list(range(n))
        for i in range(k):
            remaining = n - i
            bits = remaining.bit_length()
            j = getrandbits(bits)
            while j >= remaining:  # rejection sampling, as Random._randbelow
                j = getrandbits(bits)
            result.append(pool[j])
            pool[j] = pool[remaining - 1]
    else:
        bits = n.bit_length()
        taken: set[int] = set()
        for _ in range(k):
            j = getrandbits(bits)
            while j >= n or j in taken:
                j = getrandbits(bits)
            taken.add(j)
            result.append(j)
    return result


def insert_random_characters(
    text: str, rng: random.Random, *, ratio: float = RANDOM_CHARACTER_RATIO, alphabet: str = RANDOM_ALPHABET
) -> tuple[str, str]:
    """Insert ``round(ratio·len(text))`` characters from ``alphabet`` at uniformly random positions.

    Returns ``(new_text, inserted)`` where ``inserted`` holds the inserted characters in the order they
    appear in ``new_text``; removing those positions gives back ``text``. Python's `round` is used (ties to
    even), as in the reference implementation.

    >>> new, ins = insert_random_characters("abcdef", random.Random(0))
    >>> len(ins), len(new)
    (3, 9)
    """
    n_insert = round(ratio * len(text))
    total = len(text) + n_insert
    # Choosing the inserted slots among all final positions is uniform over interleavings. Inserting in
    # increasing slot order puts each character at its final position (a step is short: list.insert's
    # shifting is cheaper than splicing runs in Python; this runs for every chain).
    slots = sorted(sample_range(rng, total, n_insert))
    inserted = "".join(rng.choices(alphabet, k=n_insert))
    out = list(text)
    for slot, char in zip(slots, inserted):
        out.insert(slot, char)
    return "".join(out), inserted


@dataclass(frozen=True)
class RandomCharacters:
    """Neutral: insert round(0.5·|R_k|) random characters into R_k, so they make up one third of it.

    ``Edit.inserted_text`` is the inserted characters only (in order of appearance): its length is what
    length accounting subtracts; the prefix holds them interleaved with R_k.
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

    def apply(self, ctx: InterventionContext) -> Edit:
        """Insert the characters into the last prefix step; steps before it are unchanged."""
        steps = ctx.prefix_steps
        new_last, inserted = insert_random_characters(steps[-1], ctx.rng, ratio=self.ratio, alphabet=self.alphabet)
        if not inserted:
            raise InterventionFailed(
                FailureReason.STEP_TOO_SHORT, f"step {ctx.cut.index} has {len(steps[-1])} chars, nothing to insert"
            )
        return Edit(steps[:-1] + (new_last,), inserted)


@dataclass(frozen=True)
class WikipediaText:
    """Neutral: replace R_k with a paragraph drawn from a `WikipediaPool` (``pool`` may be a path to one).

    ``Edit.inserted_text`` is the paragraph.
    """

    pool: WikipediaPool | str | os.PathLike[str] | None = None

    name: ClassVar[str] = "wikipedia_text"
    category: ClassVar[Category] = Category.NEUTRAL
    needs_generator: ClassVar[bool] = False
    needs_pool: ClassVar[bool] = True  # a run gives it ``interventions.wikipedia_pool`` unless ``pool`` is set
    edit_kind: ClassVar[str] = "replace_last"

    def __post_init__(self) -> None:
        if self.pool is None:
            raise ValueError(
                "wikipedia_text needs a paragraph pool: pass pool=WikipediaPool.from_jsonl(...) (or "
                ".from_text / .from_datasets), or pool='path/to/paragraphs.jsonl'"
            )
        if not isinstance(self.pool, WikipediaPool):
            object.__setattr__(self, "pool", WikipediaPool.from_path(self.pool))

    def apply(self, ctx: InterventionContext) -> Edit:
        """Replace the last prefix step with one pool paragraph."""
        assert isinstance(self.pool, WikipediaPool)  # normalised in __post_init__
        paragraph = self.pool.choice(ctx.rng)
        return Edit(ctx.prefix_steps[:-1] + (paragraph,), paragraph)
