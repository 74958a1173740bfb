"""Reading a few rows of a large table back by position (`recovery.run_dir.positions`), across shards and row
groups, as the viewer reads one chain's continuations."""

from __future__ import annotations

import pyarrow as pa
import pytest

from recovery.run_dir.positions import RowsByKey, rows_at
from recovery.store import Table

SCHEMA = pa.schema([("id", pa.string()), ("chain_id", pa.string()), ("text", pa.string())])


@pytest.fixture
def table(tmp_path):
    """Three shards of 7 rows; chain ``c{i % 4}`` owns row ``i``."""
    table = Table(tmp_path / "rows")
    for shard in range(3):
        with table.writer(SCHEMA, writer_id=f"w{shard}") as writer:
            writer.add_many(
                {"id": f"r{i}", "chain_id": f"c{i % 4}", "text": f"text {i}"} for i in range(shard * 7, shard * 7 + 7)
            )
    return table


def test_rows_at_reads_the_rows_asked_for_in_that_order(table):
    assert rows_at(table, [20, 0, 8, 7], ["id", "text"]).column("id").to_pylist() == ["r20", "r0", "r8", "r7"]
    assert rows_at(table, [], ["id"]).num_rows == 0
    with pytest.raises(IndexError, match="out of range"):
        rows_at(table, [21], ["id"])


def test_rows_by_key_finds_each_chains_rows(table):
    rows = RowsByKey(table, "chain_id", pa.array(["c1", "c3", "c9"]))
    assert rows.rows == 21
    assert rows.positions(0).tolist() == [1, 5, 9, 13, 17]
    assert rows_at(table, rows.positions(1), ["id"]).column("id").to_pylist() == ["r3", "r7", "r11", "r15", "r19"]
    assert rows.positions(2).tolist() == []
    assert rows.counts(3).tolist() == [5, 5, 0]
