"""Reading an offline W&B run back (history rows, config, summary and table files): how the tests check what
the training code and `log_run_to_wandb` logged, without the network or a W&B server."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
_RECORD = struct.Struct("<IHB")  # crc32, length, type
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def iter_records(path: str | Path) -> Iterator[Any]:
    """The protobuf ``Record`` messages of an offline ``run-*.wandb`` file.

    The file is W&B's LevelDB-style log (what ``wandb-core`` writes and ``wandb sync`` reads): a 7-byte
    header, then 32 KiB blocks of chunks (crc32, length, FULL/FIRST/MIDDLE/LAST), each record one
    serialized ``wandb.proto.wandb_internal_pb2.Record``. A log still being written may end inside a chunk;
    the records before it are yielded.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, _ = _HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = _HEADER.size, b""
    while pos + _RECORD.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD.size:  # block trailer padding
            pos += left
            continue
        _, length, kind = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        if pos + length > len(data):  # a chunk still being written: the log ends before it
            return
        chunk = data[pos : pos + length]
        pos += length
        if kind == _FULL:
            payload = chunk
        elif kind == _FIRST:
            pending = chunk
            continue
        elif kind == _MIDDLE:
            pending += chunk
            continue
        elif kind == _LAST:
            payload, pending = pending + chunk, b""
        else:  # zero padding at the end of a block or file
            continue
        record = pb.Record()
        record.ParseFromString(payload)
        yield record


@dataclass
class OfflineRun:
    """An offline W&B run read back: ``history`` rows (key → decoded JSON value), ``summary``, ``config``
    (key → value) and whether the run's exit record was seen (``complete``)."""

    path: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    complete: bool = False

    @property
    def files(self) -> Path:
        return self.path / "files"

    def keys(self) -> set[str]:
        return {k for row in self.history for k in row}

    def table(self, row: Mapping[str, Any], key: str) -> dict[str, Any]:
        """The JSON of a table logged under ``key`` in ``row`` (``{"columns": [...], "data": [...]}``)."""
        return json.loads((self.files / row[f"{key}/path"]).read_text())


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def _decode(value_json: str) -> Any:
    try:
        return json.loads(value_json)
    except ValueError:
        return value_json


def _read_once(run_path: Path) -> OfflineRun:
    (log_file,) = run_path.glob("run-*.wandb")
    out = OfflineRun(run_path)
    for record in iter_records(log_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            out.history.append({_item_key(i): _decode(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                out.summary[_item_key(item)] = _decode(item.value_json)
        elif kind in ("config", "run"):
            updates = record.config.update if kind == "config" else record.run.config.update
            for item in updates:
                out.config[_item_key(item)] = _decode(item.value_json)
        elif kind == "exit":
            out.complete = True
    return out


def read_offline_run(run_path: str | Path, *, wait_s: float = 15.0) -> OfflineRun:
    """Read an offline run directory (``.../wandb/offline-run-*``).

    ``wandb.finish()`` can return before the W&B service has flushed the transaction log, so this waits
    up to ``wait_s`` seconds for the run's exit record (``complete``) before returning what is there. A read
    that catches the service mid-record (a record not yet parseable) is retried within the same wait.
    """
    import time

    from google.protobuf.message import DecodeError

    run_path = Path(run_path)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            run = _read_once(run_path)
        except DecodeError:
            if time.monotonic() >= deadline:
                raise
        else:
            if run.complete or time.monotonic() >= deadline:
                return run
        time.sleep(0.1)


def offline_runs(wandb_dir: str | Path) -> list[Path]:
    """The offline run directories under ``wandb_dir`` (its ``wandb/`` subfolder or itself), oldest first."""
    root = Path(wandb_dir)
    base = root / "wandb" if (root / "wandb").is_dir() else root
    return sorted(p for p in base.glob("offline-run-*") if p.is_dir())
