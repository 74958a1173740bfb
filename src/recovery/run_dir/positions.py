"""Where each chain's rows lie in a table of millions, and reading just those rows back.

A viewer shows one chain at a time: its N continuations and their grades, out of tables that may hold millions
of rows. Scanning a table for one chain id would decompress every text in it; instead the chain-id column is read
once (ids only, no text) into `RowsByKey`, and a chain's rows are read with `rows_at`, which opens only the
Parquet row groups that hold them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recovery.run_dir.chain_index import ChainIndex
from recovery.store import DamagedShard, Table

__all__ = ["RowsByKey", "rows_at"]


def rows_at(table: Table, rows: Sequence[int], columns: Sequence[str] | None = None) -> Any:
    """The rows of ``table`` at positions ``rows`` (in `recovery.store.Table.iter_batches` order across shards) as a
    `pyarrow.Table`, in the order given. Only the row groups holding them are read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = np.asarray(rows, dtype=np.int64)
    local = np.full(wanted.size, -1, dtype=np.int64)
    parts: list[Any] = []
    start = read = 0
    for shard in table.shards():
        try:
            handle = pq.ParquetFile(shard)
            for group in range(handle.metadata.num_row_groups):
                size = handle.metadata.row_group(group).num_rows
                inside = (wanted >= start) & (wanted < start + size)
                if inside.any():
                    parts.append(handle.read_row_group(group, columns=columns))
                    local[inside] = wanted[inside] - start + read
                    read += size
                start += size
        except (pa.ArrowException, OSError) as err:
            raise DamagedShard(shard, err) from None
    if (local < 0).any():
        raise IndexError(f"{table.path}: row positions out of range (the table holds {start} rows)")
    if not parts:
        return pa.table({name: pa.array([], pa.string()) for name in columns or ()})
    return pa.concat_tables(parts, promote_options="default").take(pa.array(local))


class RowsByKey:
    """The positions of each key's rows in a table (e.g. the continuations of each chain), from one read of the
    key column. ``positions(i)`` are the rows whose key is ``keys[i]`` (``keys``: the chain ids, in the order of
    the caller's own arrays), in stored order. Held as two integer arrays: 8 bytes and a bit per row."""

    def __init__(self, table: Table, column: str, keys: Any) -> None:
        import numpy as np

        lookup = ChainIndex(keys)
        owner, position, start = [], [], 0
        for batch in table.iter_batches([column]):
            index, found = lookup.find(batch.column(0))
            owner.append(index)
            position.append(np.flatnonzero(found.to_numpy(zero_copy_only=False)) + start)
            start += batch.num_rows
        owner_all = np.concatenate(owner) if owner else np.empty(0, dtype=np.int64)
        position_all = np.concatenate(position) if position else np.empty(0, dtype=np.int64)
        order = np.argsort(owner_all, kind="stable")
        self._owner, self._position = owner_all[order], position_all[order]
        self.rows = start

    def positions(self, i: int) -> Any:
        """Row positions of key ``i``'s rows (empty when it has none)."""
        import numpy as np

        low, high = np.searchsorted(self._owner, [i, i + 1])
        return self._position[low:high]

    def counts(self, n_keys: int) -> Any:
        """How many rows each of the ``n_keys`` keys has."""
        import numpy as np

        return np.bincount(self._owner, minlength=n_keys)
