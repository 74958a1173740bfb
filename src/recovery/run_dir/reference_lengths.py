"""The columns the authors' length overhead needs (`recovery.metrics.reference`), read from a run directory
column-wise: per chain, what its complete answer keeps of the prefix (prefix + separator − intervention
text) and the length of its trace's whole original response; per continuation, the stripped text's length.

Used by `recovery.run_dir.tallies` when the run's ``length`` part follows the authors (``protocol:
reference``); the default measure needs none of it. Texts are read batch by batch and only their lengths
kept, as elsewhere in the tallies.
"""

from __future__ import annotations

from typing import Any

from recovery.metrics.reference import reference_length_pct, separator_lengths
from recovery.run_dir.records import CHAINS_TABLE, TRACES_TABLE
from recovery.store import RunDir

__all__ = ["ReferenceLengths", "reference_chain_lengths", "stripped_lengths"]


class ReferenceLengths:
    """Per chain (in stored chain order): ``kept`` = prefix + separator − intervention text and
    ``original`` = the whole original response, in characters; `pct` gives the per-continuation change."""

    def __init__(self, kept: Any, original: Any) -> None:
        self.kept, self.original = kept, original

    def pct(self, index: Any, texts: Any) -> Any:
        """`recovery.metrics.reference.reference_length_pct` of the continuations ``texts`` (an Arrow string
        array) of the chains at positions ``index``."""
        return reference_length_pct(self.kept[index], self.original[index], stripped_lengths(texts))


def stripped_lengths(texts) -> Any:
    """Characters of each text of an Arrow string array once stripped (Arrow's whitespace is Python's
    ``str.strip`` whitespace), as float64: the authors' runner stores every output stripped."""
    import numpy as np
    import pyarrow.compute as pc

    trimmed = pc.utf8_trim_whitespace(pc.fill_null(texts, ""))
    return pc.utf8_length(trimmed).to_numpy(zero_copy_only=False).astype(np.float64)


def _response_chars(run: RunDir) -> dict[str, int]:
    """The length of each stored trace's whole response (its ``text``), by trace id."""
    import pyarrow.compute as pc

    out: dict[str, int] = {}
    table = run.table(TRACES_TABLE)
    if not table.exists():
        return out
    for batch in table.iter_batches(["id", "text"], batch_size=8192):
        lengths = pc.utf8_length(pc.fill_null(batch.column(1), "")).to_pylist()
        out.update(zip(batch.column(0).to_pylist(), lengths))
    return out


def reference_chain_lengths(run: RunDir) -> ReferenceLengths:
    """`ReferenceLengths` of every chain of ``run``, in the order `recovery.run_dir.tallies` reads the
    chains table. A chain whose trace is not stored gets an original length of 0 (left out, as the authors
    leave out an empty response)."""
    import numpy as np
    import pyarrow.compute as pc

    responses = _response_chars(run)
    kept, original = [], []
    for batch in run.table(CHAINS_TABLE).iter_batches(["trace_id", "prefix", "inserted_text"], batch_size=8192):
        prefix = pc.fill_null(batch.column(1), "")
        inserted = pc.utf8_length(pc.fill_null(batch.column(2), "")).to_numpy(zero_copy_only=False)
        prefix_chars = pc.utf8_length(prefix).to_numpy(zero_copy_only=False)
        kept.append(prefix_chars.astype(np.float64) + separator_lengths(prefix) - inserted)
        original.append(np.array([responses.get(t, 0) for t in batch.column(0).to_pylist()], dtype=np.float64))
    empty = np.empty(0, dtype=np.float64)
    return ReferenceLengths(np.concatenate(kept) if kept else empty, np.concatenate(original) if original else empty)
