"""Stable content-addressed ids and per-item random generators.

Every record `recovery` writes is keyed by an id derived from its content, so the same problem, trace,
intervened chain or continuation gets the same id on every machine and in every run. Randomness is derived
the same way: the generator for an item depends only on (seed, item key), never on batch size or order.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any

ID_HEX_CHARS = 16


# JSON with sorted keys and no whitespace: stable across Python versions and platforms. One encoder is
# reused: `json.dumps` with non-default options builds a new encoder per call, a third of an id's cost.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


# Strings the encoder writes as-is between quotes (ensure_ascii=False escapes only these characters).
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _canonical(parts: tuple[Any, ...]) -> bytes:
    """The canonical JSON of ``parts``. Ids are made for every chain and continuation (millions), so flat
    tuples of plain strings, ints and finite floats are formatted directly: the same text the encoder
    writes (tested against it), at a fraction of the cost."""
    pieces = []
    for part in parts:
        kind = type(part)
        if kind is str and not _NEEDS_ESCAPE.search(part):
            pieces.append(f'"{part}"')
        elif kind is int or (kind is float and math.isfinite(part)):
            pieces.append(repr(part))
        else:
            return _ENCODER.encode(parts).encode("utf-8", errors="surrogatepass")
    return ("[" + ",".join(pieces) + "]").encode("utf-8", errors="surrogatepass")


def content_id(*parts: Any) -> str:
    """Return a 16-hex-character id that depends only on ``parts`` (JSON-serialisable values).

    >>> content_id("bbh", "Is 2 prime?", "Yes") == content_id("bbh", "Is 2 prime?", "Yes")
    True
    >>> len(content_id("x"))
    16
    """
    return hashlib.sha256(_canonical(parts)).hexdigest()[:ID_HEX_CHARS]


_HEX_ID = re.compile(r"[0-9a-f]+")


def continuation_id(chain_id: str, sample_index: int) -> str:
    """``content_id("continuation", chain_id, sample_index)``, computed without the JSON encoder.

    The pipeline makes one per sampled continuation (millions): for a hex chain id the canonical JSON is
    known, so it is formatted directly — the same bytes, hence the same id.

    >>> continuation_id("0123abcd", 3) == content_id("continuation", "0123abcd", 3)
    True
    """
    if type(sample_index) is not int or not _HEX_ID.fullmatch(chain_id):
        return content_id("continuation", chain_id, sample_index)
    return _hex_continuation_id(chain_id, sample_index)


def continuation_ids(chain_id: str, n: int) -> list[str]:
    """``[continuation_id(chain_id, i) for i in range(n)]``, checking the chain id's form once.

    >>> continuation_ids("0123abcd", 2) == [content_id("continuation", "0123abcd", i) for i in range(2)]
    True
    """
    if not _HEX_ID.fullmatch(chain_id):
        return [content_id("continuation", chain_id, i) for i in range(n)]
    return [_hex_continuation_id(chain_id, i) for i in range(n)]


def _hex_continuation_id(chain_id: str, sample_index: int) -> str:
    # The canonical JSON of ("continuation", <hex id>, <int>), written out: no escaping can occur.
    payload = f'["continuation","{chain_id}",{sample_index}]'.encode("ascii")
    return hashlib.sha256(payload).hexdigest()[:ID_HEX_CHARS]


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
