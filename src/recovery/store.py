"""A sharded, append-only, resumable record store on Parquet.

Each table of a run directory is a folder of shards ``part-<writer>-<seq>.parquet``. A shard becomes
visible only through an atomic rename after it is fully written and fsynced, so a process killed at any
point leaves either a complete shard or nothing (a stray ``.tmp`` file, ignored and cleaned up). Records are
keyed by content-addressed ids; a stage asks the table which keys are done and skips them, so re-running a
killed stage neither loses nor duplicates work. Several writers (e.g. one per GPU rank) can append to one
table concurrently because each writes under its own name.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from recovery.configs import ConfigError

SHARD_GLOB = "part-*.parquet"
_SHARD_RE = re.compile(r"^part-(?P<writer>[A-Za-z0-9_]+)-(?P<seq>\d+)\.parquet$")


def _pa():
    # pyarrow is heavy; import it when a table is actually touched so `import recovery` stays fast.
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, lambda handle: handle.write(data))


def _write_atomically(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """``write`` into a temporary file beside ``path``, fsynced, then renamed over ``path``. The file is ours
    and closed on any error: pyarrow's own sink stays open when a write fails (a full disk), holding the
    removed file's space while the process lives."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):  # read-only: the removal fails too; the write's error is the one
            tmp.unlink(missing_ok=True)
        raise _naming(err, path, tmp) from err
    _fsync_dir(path.parent)


def _naming(err: OSError, path: Path, tmp: Path) -> OSError:
    """``err`` naming ``path``, the file being written: a failed ``write`` or ``fsync`` (a full disk) and
    pyarrow's writers raise without a filename, or name the temporary file, so the one-line error a user sees
    would not say where. An error that names another file (a folder above it) is kept as it is."""
    if err.errno is None or (err.filename is not None and Path(err.filename) != tmp):
        return err
    return OSError(err.errno, os.strerror(err.errno), str(path))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems do not allow opening directories
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


def id_to_int(ids: Iterable[str]) -> np.ndarray:
    """16-hex-character ids as uint64 — 8 bytes each, so millions of done-keys fit in little memory."""
    return np.fromiter((int(i, 16) for i in ids), dtype=np.uint64)


@functools.cache
def _hex_nibbles():
    """Byte → hex digit value (255 for bytes that are not lowercase hex digits)."""
    table = np.full(256, 255, dtype=np.uint8)
    for value, char in enumerate("0123456789abcdef"):
        table[ord(char)] = value
    return table


def hex16_keys(array):
    """uint64 values of an Arrow string array whose every value is 16 lowercase hex characters, else None
    (decoded from the Arrow buffers without a Python loop; the same values as `id_to_int`)."""
    pa, _ = _pa()
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


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sort and neighbour comparison: NumPy 2's `np.unique` hashes first, which
    `bench/pipeline_scale.py` shows costs more on millions of ids."""
    ordered = np.sort(np.asarray(keys, dtype=np.uint64))
    distinct = np.empty(ordered.size, dtype=bool)
    distinct[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=distinct[1:])
    return ordered[distinct]


class KeySet:
    """An immutable set of 16-hex ids held as a sorted uint64 array (membership by binary search)."""

    def __init__(self, keys: np.ndarray | None = None) -> None:
        self._keys = _sorted_unique(keys) if keys is not None and len(keys) else np.empty(0, dtype=np.uint64)

    def __len__(self) -> int:
        return int(self._keys.size)

    def __contains__(self, key: str) -> bool:
        if not self._keys.size:
            return False
        value = np.uint64(int(key, 16))
        pos = int(np.searchsorted(self._keys, value))
        return pos < self._keys.size and self._keys[pos] == value

    def contains_many(self, keys: Sequence[str]) -> np.ndarray:
        """Membership of many ids at once (a boolean array): one vectorised search instead of one per id."""
        if not self._keys.size:
            return np.zeros(len(keys), dtype=bool)
        values = id_to_int(keys)
        pos = np.minimum(np.searchsorted(self._keys, values), self._keys.size - 1)
        return self._keys[pos] == values

    def union(self, other: KeySet) -> KeySet:
        return KeySet(np.concatenate([self._keys, other._keys]))


REGENERATE = "delete it and resume the run (re-run the same `recovery run` command): its rows are regenerated"


class DamagedShard(ConfigError):
    """A shard of a table cannot be read (truncated, empty, not Parquet). The message names the file and the
    remedy: every table's rows are keyed by content-addressed ids, so a resume regenerates a deleted shard's
    rows exactly."""

    def __init__(self, shard: Path, err: BaseException) -> None:
        reason = " ".join(str(err).split()) or type(err).__name__  # Arrow's messages span lines
        super().__init__(f"{shard}: damaged shard, cannot be read ({reason}); {REGENERATE}")
        self.shard = shard


def _damaged(shard: Path, err: BaseException, columns: Sequence[str] | None = None) -> BaseException:
    """``err`` from reading ``shard`` as the error to raise: `DamagedShard` when the file cannot be read,
    ``err`` itself when the caller asked for a column the shard lacks (a bug, which keeps its traceback)."""
    pa, pq = _pa()
    if not isinstance(err, (pa.ArrowException, OSError)):
        return err
    if columns is not None:
        try:
            names = pq.read_schema(shard).names
        except (pa.ArrowException, OSError):
            return DamagedShard(shard, err)
        if any(c not in names for c in columns):
            return err
    return DamagedShard(shard, err)


class Table:
    """One table (a folder of Parquet shards) of a run directory. Every read of a shard goes through here,
    so a shard that cannot be read raises `DamagedShard` (one line naming it) for every reader."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def shards(self) -> list[Path]:
        """Complete shards in a stable order (writer, sequence)."""
        if not self.path.is_dir():
            if self.path.exists():
                raise ConfigError(f"{self.path}: a file where the folder of the table's shards should be; {REGENERATE}")
            return []
        found = []
        for p in self.path.glob(SHARD_GLOB):
            m = _SHARD_RE.match(p.name)
            if m:
                found.append((m["writer"], int(m["seq"]), p))
        return [p for _, _, p in sorted(found)]

    def exists(self) -> bool:
        return bool(self.shards())

    def has_column(self, name: str) -> bool:
        """Whether every shard stores ``name`` (from the Parquet footers; shards written before a column was
        added lack it)."""
        shards = self.shards()
        return bool(shards) and all(name in self._open(p).schema_arrow.names for p in shards)

    def count(self) -> int:
        """Number of rows, from the Parquet footers (no data is read)."""
        return sum(self._open(p).metadata.num_rows for p in self.shards())

    @staticmethod
    def _open(shard: Path) -> Any:
        """``shard`` as a `pyarrow.parquet.ParquetFile` (its footer read), or `DamagedShard`."""
        _, pq = _pa()
        try:
            return pq.ParquetFile(shard)
        except Exception as err:  # noqa: BLE001 — only unreadable files become DamagedShard; see _damaged
            raise _damaged(shard, err) from None

    def iter_batches(self, columns: Sequence[str] | None = None, batch_size: int = 65_536) -> Iterator[Any]:
        """Stream `pyarrow.RecordBatch`es across shards, reading only ``columns``."""
        for shard in self.shards():
            batches = self._open(shard).iter_batches(batch_size=batch_size, columns=columns)
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except Exception as err:  # noqa: BLE001 — a damaged data page, or a bug's missing column
                    raise _damaged(shard, err, columns) from None
                yield batch

    def iter_rows(self, columns: Sequence[str] | None = None, batch_size: int = 8_192) -> Iterator[dict[str, Any]]:
        """Stream rows as dicts (convenient; use `iter_batches` for bulk numeric work)."""
        for batch in self.iter_batches(columns, batch_size):
            yield from batch.to_pylist()

    def keys(self, column: str = "id") -> KeySet:
        """The set of ids already stored (the resume check)."""
        parts = []
        for batch in self.iter_batches([column]):
            keys = hex16_keys(batch.column(0))  # vectorised for content-addressed ids
            parts.append(keys if keys is not None else id_to_int(batch.column(0).to_pylist()))
        return KeySet(np.concatenate(parts) if parts else None)

    def read(self, columns: Sequence[str] | None = None):
        """The whole table as a `pyarrow.Table` (small tables only)."""
        pa, pq = _pa()
        shards = self.shards()
        if not shards:
            return pa.table({})
        return pa.concat_tables([self._read_shard(s, columns) for s in shards], promote_options="default")

    def _read_shard(self, shard: Path, columns: Sequence[str] | None) -> Any:
        _, pq = _pa()
        try:
            return pq.read_table(shard, columns=columns)
        except Exception as err:  # noqa: BLE001 — only unreadable files become DamagedShard; see _damaged
            raise _damaged(shard, err, columns) from None

    def clean_stale(self) -> int:
        """Remove temporary files left by killed writers; returns how many were removed."""
        if not self.path.is_dir():
            return 0
        stale = list(self.path.glob(".*.tmp"))
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    def writer(self, schema: Any, *, writer_id: str = "w0", rows_per_shard: int = 50_000) -> ShardWriter:
        return ShardWriter(self, schema, writer_id=writer_id, rows_per_shard=rows_per_shard)


ROW_GROUP_BYTES = 16 * 2**20


class ShardWriter:
    """Buffers rows and commits them as atomic shards of at most ``rows_per_shard`` rows.

    Use as a context manager; rows are durable only after `flush` (called automatically when the buffer
    is full and on a clean exit). A caller that must not split a group (e.g. the n samples of one chain)
    adds the group with one `add_many` call: a flush never happens in the middle of it.
    """

    def __init__(self, table: Table, schema: Any, *, writer_id: str = "w0", rows_per_shard: int = 50_000) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_]+", writer_id):
            raise ValueError(f"writer_id must be alphanumeric/underscore, got {writer_id!r}")
        self.table = table
        self.schema = schema
        self.writer_id = writer_id
        self.rows_per_shard = rows_per_shard
        self._buffer: list[Mapping[str, Any]] = []
        self._batches: list[Any] = []  # column-wise additions (pyarrow RecordBatches), after the rows
        self._batch_rows = 0
        self._next_seq = self._first_free_seq()
        self.rows_written = 0

    def _first_free_seq(self) -> int:
        seqs = [
            int(m["seq"])
            for p in self.table.shards()
            if (m := _SHARD_RE.match(p.name)) and m["writer"] == self.writer_id
        ]
        return max(seqs, default=-1) + 1

    def add(self, row: Mapping[str, Any]) -> None:
        self.add_many([row])

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self._buffer.extend(rows)
        if self.buffered >= self.rows_per_shard:
            self.flush()

    def add_columns(self, columns: Mapping[str, Sequence[Any]]) -> None:
        """Add rows given column-wise (name → equal-length values): the fast path for bulk stages, which
        skips building one dict per row. Like `add_many`, the rows are never split across shards."""
        pa, _ = _pa()
        batch = pa.RecordBatch.from_pydict(dict(columns), schema=self.schema)
        if batch.num_rows:
            self._batches.append(batch)
            self._batch_rows += batch.num_rows
        if self.buffered >= self.rows_per_shard:
            self.flush()

    @property
    def buffered(self) -> int:
        """Rows added but not yet committed."""
        return len(self._buffer) + self._batch_rows

    def flush(self) -> None:
        """Commit buffered rows as one new shard (atomic)."""
        if not self.buffered:
            return
        pa, pq = _pa()
        self.table.path.mkdir(parents=True, exist_ok=True)
        parts = [pa.Table.from_pylist(self._buffer, schema=self.schema)] if self._buffer else []
        if self._batches:
            parts.append(pa.Table.from_batches(self._batches, schema=self.schema))
        data = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        final = self.table.path / f"part-{self.writer_id}-{self._next_seq:06d}.parquet"
        # Row groups of at most ~ROW_GROUP_BYTES, so readers stream a shard of long texts (traces, prefixes)
        # group by group instead of decompressing it whole.
        rows_per_group = max(1, min(data.num_rows, ROW_GROUP_BYTES * data.num_rows // max(data.nbytes, 1)))
        _write_atomically(
            final, lambda handle: pq.write_table(data, handle, compression="zstd", row_group_size=rows_per_group)
        )
        self.rows_written += data.num_rows
        self._next_seq += 1
        self._buffer = []
        self._batches = []
        self._batch_rows = 0

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Flush on errors too: rows already buffered are finished work and must not be lost.
        self.flush()


class RunDir:
    """A run directory: one `Table` per stage plus small JSON/Markdown artefacts."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def table(self, name: str) -> Table:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"bad table name {name!r}")
        return Table(self.path / name)

    def file(self, name: str) -> Path:
        return self.path / name

    def clean_stale(self) -> int:
        """Remove the temporary files killed writers left anywhere in the run directory (table shards, the
        JSON files in its root, the report and its figures): every atomic write here names its temporary
        file ``.<name>.<hex>.tmp``. Returns how many were removed."""
        if not self.path.is_dir():
            return 0
        stale = [p for p in self.path.rglob(".*.tmp") if p.is_file()]
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)
