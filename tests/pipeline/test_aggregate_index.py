"""The aggregate stage's chain lookup: vectorised for content-addressed ids, exact for any other ids."""

from __future__ import annotations

import pyarrow as pa

from recovery.ids import content_id
from recovery.pipeline.aggregate import ChainIndex, _hex16_keys


def test_hex_ids_decode_to_their_integer_value():
    ids = [content_id("chain", i) for i in range(50)]
    assert _hex16_keys(pa.array(ids)).tolist() == [int(i, 16) for i in ids]
    assert _hex16_keys(pa.array(["not-hex-at-all!!"])) is None
    assert _hex16_keys(pa.array(["abc"])) is None and _hex16_keys(pa.array([ids[0], None])) is None


def test_lookup_finds_chains_in_any_batch_slice_and_skips_unknown_ids():
    ids = [content_id("chain", i) for i in range(1000)]
    index = ChainIndex(ids)
    positions, found = index.find(pa.array([ids[5], "zz", ids[999], content_id("other"), ids[0]]))
    assert positions.tolist() == [5, 999, 0] and found.to_pylist() == [True, False, True, False, True]
    positions, found = index.find(pa.array(ids).slice(10, 5))  # an Arrow slice keeps its buffer offset
    assert positions.tolist() == list(range(10, 15)) and all(found.to_pylist())


def test_non_hex_chain_ids_fall_back_to_exact_lookup():
    positions, found = ChainIndex(["a", "b"]).find(pa.array(["b", "c", "a"]))
    assert positions.tolist() == [1, 0] and found.to_pylist() == [True, False, True]
