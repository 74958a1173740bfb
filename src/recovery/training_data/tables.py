"""The raw tables of a run as flat rows for export: original traces, intervened chains, and graded
continuations, each joined with its problem so a row can be read on its own."""

from __future__ import annotations

from typing import Any

from recovery.run_dir import records
from recovery.training_data.source import RunData


def trace_rows(data: RunData) -> list[dict[str, Any]]:
    rows = []
    for trace in sorted(data.traces.values(), key=lambda t: t.id):
        problem = data.problems.get(trace.problem_id)
        kept, reason = data.kept.get(trace.id, (None, None))
        info = data.trace_info.get(trace.id, {})
        rows.append(
            {
                "id": trace.id,
                "problem_id": trace.problem_id,
                "model": trace.model,
                "question": problem.question if problem else None,
                "answer": problem.answer if problem else None,
                "answer_type": str(problem.answer_type) if problem else None,
                "domain": problem.domain if problem else None,
                "source": problem.source if problem else None,
                "text": trace.text,
                "reasoning": trace.reasoning,
                "answer_text": trace.answer_text,
                "closed": trace.closed,
                "reasoning_chars": len(trace.reasoning),
                "n_tokens": info.get("n_tokens"),
                "finish_reason": info.get("finish_reason"),
                "kept": kept,
                "kept_reason": reason,
            }
        )
    return rows


# Stored chain columns the exported rows leave out: the resume key and a length-accounting helper.
_RUN_ONLY_CHAIN_COLUMNS = ("key", "kept_chars")


def chain_rows(data: RunData) -> list[dict[str, Any]]:
    """The run's chains as stored (`recovery.run_dir.records.chain_row`), with their problem's fields."""
    rows = []
    for c in data.chains:
        p = data.problems.get(c.problem_id)
        row = records.chain_row(c)
        for column in _RUN_ONLY_CHAIN_COLUMNS:
            del row[column]
        rows.append(
            {
                **row,
                "question": p.question if p else None,
                "answer": p.answer if p else None,
                "answer_type": str(p.answer_type) if p else None,
                "domain": p.domain if p else None,
                "source": p.source if p else None,
            }
        )
    return rows


def continuation_rows(data: RunData) -> list[dict[str, Any]]:
    chains = {c.id: c for c in data.chains}
    rows = []
    for chain_id in sorted(data.continuations):
        chain = chains.get(chain_id)
        problem = data.problems.get(chain.problem_id) if chain else None
        for s in data.continuations[chain_id]:
            rows.append(
                {
                    "id": s.id,
                    "chain_id": chain_id,
                    "problem_id": chain.problem_id if chain else None,
                    "model": s.model,
                    "sample_index": s.sample_index,
                    "text": s.text,
                    "n_tokens": s.n_tokens,
                    "finish_reason": s.finish_reason,
                    "verdict": s.verdict,
                    "extracted": s.extracted,
                    "correct": s.correct if s.verdict is not None else None,
                    "intervention": chain.intervention if chain else None,
                    "category": str(chain.category) if chain else None,
                    "target_t": chain.target_t if chain else None,
                    "domain": problem.domain if problem else None,
                    "source": problem.source if problem else None,
                    "answer": problem.answer if problem else None,
                }
            )
    return rows


def breakdown(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """``{"by_<key>": {value: count}}`` for each of ``keys`` (for the card's counts table)."""
    out = {}
    for key in keys:
        values: dict[str, int] = {}
        for row in rows:
            value = str(row.get(key))
            values[value] = values.get(value, 0) + 1
        out[f"by_{key}"] = dict(sorted(values.items()))
    return out
