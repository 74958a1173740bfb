"""Finding chain ids in a run's chains table, a whole Arrow column of ids at a time (the aggregate stage
looks up tens of millions of continuation and grade rows)."""

from __future__ import annotations

from recovery.store import hex16_keys


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
        keys = hex16_keys(self._ids)
        self._order = None if keys is None else np.argsort(keys, kind="stable")
        self._sorted = None if keys is None else keys[self._order]

    def find(self, chain_ids):
        """(positions of the ids that are chains, boolean Arrow mask of those ids) for an Arrow string array."""
        import numpy as np
        import pyarrow as pa

        keys = hex16_keys(chain_ids) if self._sorted is not None else None
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
