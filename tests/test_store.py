import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from recovery.ids import content_id
from recovery.store import KeySet, RunDir, Table, atomic_write_text, id_to_int

SCHEMA = pa.schema([("id", pa.string()), ("value", pa.int64())])


def rows(n, start=0):
    return [{"id": content_id("row", i), "value": i} for i in range(start, start + n)]


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "summary.json"
    atomic_write_text(target, "old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]


def test_writer_shards_and_reads_back(tmp_path):
    table = Table(tmp_path / "grades")
    with table.writer(SCHEMA, rows_per_shard=4) as w:
        w.add_many(rows(10))
    # 10 rows in shards of ≥4: add_many flushes once the buffer reaches 4, so one shard of 10 here.
    assert table.count() == 10
    with table.writer(SCHEMA, rows_per_shard=4) as w:
        for r in rows(6, start=10):
            w.add(r)
    assert [p.name for p in table.shards()] == [
        "part-w0-000000.parquet",
        "part-w0-000001.parquet",
        "part-w0-000002.parquet",
    ]
    assert table.count() == 16
    assert sorted(r["value"] for r in table.iter_rows()) == list(range(16))
    assert table.read(["value"]).num_rows == 16


def test_keys_resume_check(tmp_path):
    table = Table(tmp_path / "t")
    assert len(table.keys()) == 0
    with table.writer(SCHEMA) as w:
        w.add_many(rows(100))
    keys = table.keys()
    assert len(keys) == 100
    assert content_id("row", 5) in keys
    assert content_id("row", 500) not in keys


def test_keyset_union_and_dedup():
    a = KeySet(id_to_int([content_id(1), content_id(2)]))
    b = KeySet(id_to_int([content_id(2), content_id(3)]))
    assert len(a.union(b)) == 3


def test_two_writers_do_not_collide(tmp_path):
    table = Table(tmp_path / "t")
    with table.writer(SCHEMA, writer_id="rank0") as w0, table.writer(SCHEMA, writer_id="rank1") as w1:
        w0.add_many(rows(3))
        w1.add_many(rows(3, start=3))
    assert table.count() == 6 and len(table.shards()) == 2


def test_killed_writer_leaves_no_partial_shard(tmp_path):
    """A process SIGKILLed while it writes leaves complete shards only; the stale temp file is cleaned."""
    table_path = tmp_path / "t"
    script = textwrap.dedent(f"""
        import os, signal, pyarrow as pa
        from recovery.store import Table
        schema = pa.schema([("id", pa.string()), ("value", pa.int64())])
        w = Table({str(table_path)!r}).writer(schema, rows_per_shard=10)
        w.add_many([{{"id": "%016x" % i, "value": i}} for i in range(10)])   # committed shard
        w.add_many([{{"id": "%016x" % i, "value": i}} for i in range(10, 15)])  # buffered only
        open({str(table_path / ".part-w0-000009.parquet.dead.tmp")!r}, "wb").write(b"partial")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    table = Table(table_path)
    assert table.count() == 10
    assert table.clean_stale() == 1
    assert not any(p.name.endswith(".tmp") for p in table_path.iterdir())


def test_writer_flushes_on_exception(tmp_path):
    table = Table(tmp_path / "t")
    with pytest.raises(RuntimeError):
        with table.writer(SCHEMA) as w:
            w.add_many(rows(3))
            raise RuntimeError("boom")
    assert table.count() == 3


def test_rundir_rejects_bad_table_names(tmp_path):
    run = RunDir(tmp_path)
    assert run.table("grades").path == tmp_path / "grades"
    with pytest.raises(ValueError):
        run.table("../escape")
    with pytest.raises(ValueError):
        Table(tmp_path).writer(SCHEMA, writer_id="a/b")


def test_keys_of_content_ids_and_of_other_ids_are_the_same_integers(tmp_path):
    """`Table.keys` decodes content-addressed ids from Arrow buffers; any other id goes through int()."""
    import pyarrow as pa

    from recovery.ids import content_id
    from recovery.store import RunDir, hex16_keys, id_to_int

    hex_ids = [content_id("row", i) for i in range(300)]
    assert hex16_keys(pa.array(hex_ids)).tolist() == id_to_int(hex_ids).tolist()
    schema = pa.schema([("id", pa.string())])
    table = RunDir(tmp_path).table("things")
    with table.writer(schema, writer_id="a") as writer:
        writer.add_many({"id": i} for i in hex_ids)
    with table.writer(schema, writer_id="b") as writer:
        writer.add_many({"id": i} for i in ["ABCDEF", "ff"])  # not 16 lowercase hex characters
    keys = table.keys("id")
    assert len(keys) == 302
    assert all(k in keys for k in hex_ids) and "abcdef" in keys and "ff" in keys and "fe" not in keys


def test_shards_of_long_texts_are_written_in_small_row_groups(tmp_path):
    """Readers stream row group by row group: a shard of long texts must not be one huge group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from recovery.store import ROW_GROUP_BYTES, RunDir

    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    table = RunDir(tmp_path).table("traces")
    text = "x" * 100_000
    n = 3 * ROW_GROUP_BYTES // len(text)
    with table.writer(schema, rows_per_shard=n + 1) as writer:
        writer.add_many({"id": f"{i:016x}", "text": text} for i in range(n))
    (shard,) = table.shards()
    meta = pq.ParquetFile(shard).metadata
    assert meta.num_rows == n and meta.num_row_groups >= 3
    assert max(meta.row_group(g).num_rows for g in range(meta.num_row_groups)) * len(text) <= 1.1 * ROW_GROUP_BYTES
    assert sum(b.num_rows for b in table.iter_batches(["id"], batch_size=7)) == n


def test_keyset_holds_each_id_once_in_order():
    import numpy as np

    from recovery.store import KeySet, _sorted_unique

    values = np.random.default_rng(0).integers(0, 500, 4000).astype(np.uint64)
    assert _sorted_unique(values).tolist() == sorted(set(values.tolist()))
    keys = KeySet(values)
    assert len(keys) == len(set(values.tolist()))
    assert f"{int(values[0]):x}" in keys and "1ff" not in KeySet(np.array([1, 2], dtype=np.uint64))


def test_every_read_of_a_damaged_shard_names_it(tmp_path):
    """Truncated, empty or with a damaged data page: every way a table is read raises `DamagedShard` naming
    the shard; asking for a column a shard lacks is a caller's bug and keeps its own error."""
    from recovery.store import DamagedShard

    table = Table(tmp_path / "t")
    with table.writer(SCHEMA) as w:
        w.add_many(rows(50))
    (shard,) = table.shards()
    whole = shard.read_bytes()
    with pytest.raises(pa.ArrowInvalid) as missing:
        table.read(["no_such_column"])
    assert not isinstance(missing.value, DamagedShard)
    page = bytearray(whole)
    for i in range(4, len(whole) // 2):  # the data pages, behind the magic bytes; the footer intact
        page[i] ^= 0x5A
    for damaged in (whole[: len(whole) // 2], b"", bytes(page)):
        shard.write_bytes(damaged)
        reads = [table.keys, table.read, lambda: list(table.iter_rows())]
        if damaged != bytes(page):  # a damaged page leaves the footer readable
            reads += [table.count, lambda: table.has_column("id")]
        for read in reads:
            with pytest.raises(DamagedShard, match=f"^{shard}: damaged shard, cannot be read"):
                read()


def test_a_file_where_a_table_folder_should_be_is_named(tmp_path):
    from recovery.configs import ConfigError

    (tmp_path / "chains").write_text("not a folder")
    with pytest.raises(ConfigError, match=f"^{tmp_path / 'chains'}: a file where the folder .* delete it and resume"):
        RunDir(tmp_path).table("chains").count()


def test_a_read_only_folder_names_the_file_not_its_temporary(tmp_path, monkeypatch):
    """On a read-only mount the write fails, and so does the removal of its temporary file: the error a user
    sees names the file being written (an atomic write, a table's shard), never the temporary. A boundary
    fake: a read-only mount needs privileges, so the rename and the removal raise EROFS as such a mount's
    would (`tests/test_cli_damaged.py` runs the real mount where it may)."""
    import errno
    import os
    from pathlib import Path

    def read_only(*paths, **_):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(paths[0]))

    monkeypatch.setattr(os, "replace", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    target = tmp_path / "summary.json"
    with pytest.raises(OSError) as err:
        atomic_write_text(target, "{}")
    assert (err.value.errno, err.value.filename) == (errno.EROFS, str(target))
    table = Table(tmp_path / "grades")
    with pytest.raises(OSError) as err:
        with table.writer(SCHEMA) as writer:
            writer.add_many(rows(3))
    assert err.value.errno == errno.EROFS and err.value.filename.endswith(".parquet"), err.value.filename
    assert Path(err.value.filename).parent == table.path and ".tmp" not in err.value.filename
