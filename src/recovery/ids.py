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


def continuation_ids(chain_id: str, n: int) -> list[str]:
    """The ids of a chain's samples 0..n-1: consecutive 16-hex-character pieces of one SHAKE-128 stream of
    the chain's key, ``("continuation", chain_id)``.

    One hash per chain instead of one per sample (the pipeline makes millions). An extendable-output
    hash's shorter output is a prefix of its longer one, so sample i's id does not depend on ``n``.

    >>> continuation_ids("0123abcd", 3)[:2] == continuation_ids("0123abcd", 2)
    True
    """
    if type(n) is not int or n < 0:
        raise ValueError(f"n must be an int ≥ 0, got {n!r}")
    if n == 0:
        return []
    # hexdigest takes its length in bytes: two hex characters each.
    stream = hashlib.shake_128(_canonical(("continuation", chain_id))).hexdigest(ID_HEX_CHARS // 2 * n)
    return [stream[i : i + ID_HEX_CHARS] for i in range(0, len(stream), ID_HEX_CHARS)]


def continuation_id(chain_id: str, sample_index: int) -> str:
    """The id of sample ``sample_index`` (an int ≥ 0) of chain ``chain_id``: ``continuation_ids(chain_id,
    sample_index + 1)[-1]``.

    >>> continuation_id("0123abcd", 1) == continuation_ids("0123abcd", 2)[1]
    True
    """
    if type(sample_index) is not int or sample_index < 0:
        raise ValueError(f"sample_index must be an int ≥ 0, got {sample_index!r}")
    return continuation_ids(chain_id, sample_index + 1)[-1]


def item_seed(seed: int, *key: Any) -> int:
    """Derive a 64-bit seed for one item from a global ``seed`` and the item's key."""
    digest = hashlib.sha256(_canonical((int(seed), *key))).digest()
    return int.from_bytes(digest[:8], "big")


class ItemSeeds:
    """`item_seed` for many items whose keys differ only in a last string part: ``ItemSeeds(seed, *fixed)(last)
    == item_seed(seed, *fixed, last)``. The shared start of the canonical JSON is encoded once, which halves
    the cost per item (a seed per intervened chain: millions).

    >>> ItemSeeds(3, "continuation")("abc") == item_seed(3, "continuation", "abc")
    True
    """

    def __init__(self, seed: int, *fixed: Any) -> None:
        self.seed = int(seed)
        self.fixed = fixed
        closing = b',""]'  # the canonical form of a trailing empty string part, with the closing bracket
        self._head = _canonical((self.seed, *fixed, ""))[: -len(closing)] + b',"'

    def __call__(self, last: str) -> int:
        if type(last) is not str or _NEEDS_ESCAPE.search(last):
            return item_seed(self.seed, *self.fixed, last)
        digest = hashlib.sha256(self._head + last.encode("utf-8", errors="surrogatepass") + b'"]').digest()
        return int.from_bytes(digest[:8], "big")


# Request seeds keep 31 bits: every backend (torch, vLLM, OpenAI-compatible servers) accepts them.
_REQUEST_SEED_MASK = 0x7FFFFFFF


def request_seed(seed: int, *key: Any) -> int:
    """The seed of one generation request: `item_seed` cut to the 31 bits every backend accepts.

    >>> 0 <= request_seed(0, "trace", "m", "p1") < 2**31
    True
    """
    return item_seed(seed, *key) & _REQUEST_SEED_MASK


class RequestSeeds(ItemSeeds):
    """`request_seed` for many items whose keys differ only in a last string part (see `ItemSeeds`).

    >>> RequestSeeds(3, "continuation")("abc") == request_seed(3, "continuation", "abc")
    True
    """

    def __call__(self, last: str) -> int:
        return super().__call__(last) & _REQUEST_SEED_MASK


def fallback_request_seed(engine_seed: int, request_id: str) -> int:
    """The seed a backend gives a request that carries none: derived from the engine's seed and the request
    id, so a resumed run redraws the same samples; 31 bits, like `request_seed`. Every backend uses this one
    (the pipeline's own requests always carry a seed).

    >>> fallback_request_seed(0, "item-1") == fallback_request_seed(0, "item-1") < 2**31
    True
    """
    digest = hashlib.sha256(f"{engine_seed}:{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


def item_rng(seed: int, *key: Any) -> random.Random:
    """A `random.Random` private to one item: same (seed, key) → same stream, whatever else runs.

    >>> item_rng(0, "a", 0.3).random() == item_rng(0, "a", 0.3).random()
    True
    """
    return random.Random(item_seed(seed, *key))
