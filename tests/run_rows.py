"""Rows of hand-built run directories for tests: continuation rows of any (chain, sample index), and grade rows
through the grades stage's own column builder (`recovery.pipeline.grade_workers.grade_columns`).

The pipeline writes continuations column-wise (`recovery.pipeline.continuation_work.ContinuationBatch`),
one chain's N samples at once; `continuation_row` is the same row for one sample, for tests that need rows
the pipeline would not write together (and the oracle `ContinuationBatch` is tested against).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recovery.types import Continuation, Grade


def continuation_row(
    c: Continuation, problem_id: str, prompt_tokens: int | None = None, prefilled_tokens: int | None = None
) -> dict[str, Any]:
    """The stored row of one continuation (the columns of `recovery.run_dir.records.CONTINUATIONS`)."""
    return {
        "id": c.id,
        "chain_id": c.chain_id,
        "problem_id": problem_id,
        "sample_index": c.sample_index,
        "model": c.model,
        "text": c.text,
        "n_tokens": c.n_tokens,
        "finish_reason": c.finish_reason,
        "prompt_tokens": prompt_tokens,
        "prefilled_tokens": prefilled_tokens,
    }


def add_grades(writer, ids: Sequence[str], chain_ids: Sequence[str], grades: Sequence[Grade]) -> None:
    """Add rule-based grades (no judge) of continuations ``ids`` to a grades-table writer."""
    from recovery.pipeline.grade_workers import grade_columns

    writer.add_columns(grade_columns(list(ids), list(chain_ids), list(grades), [None] * len(grades), "rule"))
