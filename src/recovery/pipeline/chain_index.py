"""Finding chain ids in a run's chains table, a whole Arrow column of ids at a time (the aggregate stage
looks up tens of millions of continuation and grade rows)."""

from __future__ import annotations

import functools


class ChainIndex:
    """Positions of chain ids in the chains table, for whole Arrow columns of ids at a time.

    Built once per aggregation (a hash set rebuilt per batch would make the stage quadratic in the number
    of chains). Content-addressed ids are 16 hex characters: they are decoded to uint64 without a Python
    loop and found by binary search; a column holding any other id is looked up in a dict instead.
    """

    def __init__(self, ids) -> None:
        """``ids``: the chain ids in stored order (an Arrow string array or a list of strings)."""
        import numpy as np
        import pyarrow as pa

        self._ids = ids if isinstance(ids, (pa.Array, pa.ChunkedArray)) else pa.array(ids, type=pa.string())
        self._dict: dict[str, int] | None = None
        keys = _hex16_keys(self._ids)
        self._order = None if keys is None else np.argsort(keys, kind="stable")
        self._sorted = None if keys is None else keys[self._order]

    def find(self, chain_ids):
        """(positions of the ids that are chains, boolean Arrow mask of those ids) for an Arrow string array."""
        import numpy as np
        import pyarrow as pa

        keys = _hex16_keys(chain_ids) if self._sorted is not None else None
        if keys is None:
            if self._dict is None:
                self._dict = {chain_id: i for i, chain_id in enumerate(self._ids.to_pylist())}
            values = chain_ids.to_pylist()
            found = np.array([v in self._dict for v in values], dtype=bool)
            index = np.array([self._dict[v] for v, f in zip(values, found) if f], dtype=np.int64)
            return index, pa.array(found)
        if not self._sorted.size:
            return np.empty(0, dtype=np.int64), pa.array(np.zeros(len(keys), dtype=bool))
        pos = np.minimum(np.searchsorted(self._sorted, keys), self._sorted.size - 1)
        found = self._sorted[pos] == keys
        return self._order[pos[found]].astype(np.int64), pa.array(found)


@functools.cache
def _hex_nibbles():
    """Byte → hex digit value (255 for bytes that are not lowercase hex digits)."""
    import numpy as np

    table = np.full(256, 255, dtype=np.uint8)
    for value, char in enumerate("0123456789abcdef"):
        table[ord(char)] = value
    return table


def _hex16_keys(array):
    """uint64 values of an Arrow string array whose every value is 16 lowercase hex characters, else None."""
    import numpy as np
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count or array.type not in (pa.string(), pa.large_string()):
        return None
    if len(array) == 0:
        return np.empty(0, dtype=np.uint64)
    offset_type = np.int32 if array.type == pa.string() else np.int64
    offsets = np.frombuffer(array.buffers()[1], dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    if not np.all(np.diff(offsets) == 16):
        return None
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(-1, 16)
    nibbles = _hex_nibbles()[data]
    if (nibbles > 15).any():
        return None
    keys = np.zeros(len(array), dtype=np.uint64)
    for column in range(16):
        keys = (keys << np.uint64(4)) | nibbles[:, column].astype(np.uint64)
    return keys
