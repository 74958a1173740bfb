"""Writing an analysis' raw result rows as one Parquet file, atomically (shared by the analyses that need it)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from recovery.store import atomic_write_bytes


def write_parquet_rows(path: Path, rows: list[dict[str, Any]], schema: Any = None) -> None:
    """Write ``rows`` (dicts, one per row) to ``path`` as zstd Parquet in one atomic write.

    ``schema`` (a `pyarrow.Schema`) fixes the column types, so an empty or all-null column keeps its type;
    without it pyarrow infers them from the rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf, compression="zstd")
    atomic_write_bytes(path, buf.getvalue())
