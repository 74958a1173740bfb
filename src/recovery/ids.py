"""Stable content-addressed ids and per-item random generators.

Every record `recovery` writes is keyed by an id derived from its content, so the same problem, trace,
intervened chain or continuation gets the same id on every machine and in every run. Randomness is derived
the same way: the generator for an item depends only on (seed, item key), never on batch size or order.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

ID_HEX_CHARS = 16


def _canonical(parts: tuple[Any, ...]) -> bytes:
    # JSON with sorted keys and no whitespace: stable across Python versions and platforms.
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode(
        "utf-8", errors="surrogatepass"
    )


def content_id(*parts: Any) -> str:
    """Return a 16-hex-character id that depends only on ``parts`` (JSON-serialisable values).

    >>> content_id("bbh", "Is 2 prime?", "Yes") == content_id("bbh", "Is 2 prime?", "Yes")
    True
    >>> len(content_id("x"))
    16
    """
    return hashlib.sha256(_canonical(parts)).hexdigest()[:ID_HEX_CHARS]


def item_seed(seed: int, *key: Any) -> int:
    """Derive a 64-bit seed for one item from a global ``seed`` and the item's key."""
    digest = hashlib.sha256(_canonical((int(seed), *key))).digest()
    return int.from_bytes(digest[:8], "big")


def item_rng(seed: int, *key: Any) -> random.Random:
    """A `random.Random` private to one item: same (seed, key) → same stream, whatever else runs.

    >>> item_rng(0, "a", 0.3).random() == item_rng(0, "a", 0.3).random()
    True
    """
    return random.Random(item_seed(seed, *key))
