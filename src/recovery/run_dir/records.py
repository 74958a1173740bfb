"""The run directory's tables: their names, their Arrow schemas, and conversions between rows and
`recovery.types` records.

Tables (one folder of Parquet shards each, see `recovery.store`):

  problems             one row per problem
  traces               one row per (model, problem) original trace
  kept                 the filter's verdict per trace (kept or the reason it was dropped)
  chains               one row per intervened chain; ``key`` = (trace, intervention, t) is the resume key
  skips                items a stage skipped, with the reason (counted in the summary, never retried)
  continuations        N rows per chain (written together, so a chain is never half-done)
  grades               one row per continuation
  judge_disagreements  the continuations where the LLM judge and the rule-based grader disagree
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from recovery.ids import content_id
from recovery.plan.parts import TraceReading
from recovery.segment import ThinkTags
from recovery.types import Intervened, Problem, Trace

PROBLEMS_TABLE = "problems"
TRACES_TABLE = "traces"
KEPT_TABLE = "kept"
CHAINS_TABLE = "chains"
SKIPS_TABLE = "skips"
CONTINUATIONS_TABLE = "continuations"
GRADES_TABLE = "grades"
JUDGE_DISAGREEMENTS_TABLE = "judge_disagreements"
# The tables whose rows are keyed by a unique id: a repeated id is a row written twice.
KEYED_TABLES = (PROBLEMS_TABLE, TRACES_TABLE, KEPT_TABLE, CHAINS_TABLE, CONTINUATIONS_TABLE, GRADES_TABLE)

PROBLEMS = pa.schema(
    [
        ("id", pa.string()),
        ("domain", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("answer_type", pa.string()),
        ("source", pa.string()),
        ("metadata", pa.string()),
    ]
)
TRACES = pa.schema(
    [
        ("id", pa.string()),
        ("problem_id", pa.string()),
        ("model", pa.string()),
        ("text", pa.string()),
        ("closed", pa.bool_()),
        ("reasoning_chars", pa.int64()),
        ("n_tokens", pa.int64()),
        ("finish_reason", pa.string()),
    ]
)
KEPT = pa.schema(
    [
        ("id", pa.string()),
        ("model", pa.string()),
        ("problem_id", pa.string()),
        ("kept", pa.bool_()),
        ("reason", pa.string()),
    ]
)
CHAINS = pa.schema(
    [
        ("id", pa.string()),
        ("key", pa.string()),
        ("trace_id", pa.string()),
        ("problem_id", pa.string()),
        ("model", pa.string()),
        ("intervention", pa.string()),
        ("category", pa.string()),
        ("target_t", pa.float64()),
        ("actual_t", pa.float64()),
        ("cut_index", pa.int64()),
        ("n_steps", pa.int64()),
        ("prefix", pa.string()),
        ("inserted_text", pa.string()),
        ("original_prefix_chars", pa.int64()),
        ("original_reasoning_chars", pa.int64()),
        ("seed", pa.int64()),
        ("options", pa.string()),
        ("kept_chars", pa.int64()),
    ]
)
SKIPS = pa.schema(
    [
        ("id", pa.string()),
        ("stage", pa.string()),
        ("item", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
CONTINUATIONS = pa.schema(
    [
        ("id", pa.string()),
        ("chain_id", pa.string()),
        ("problem_id", pa.string()),
        ("sample_index", pa.int64()),
        ("model", pa.string()),
        ("text", pa.string()),
        ("n_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("prefilled_tokens", pa.int64()),
    ]
)
GRADES = pa.schema(
    [
        ("id", pa.string()),
        ("chain_id", pa.string()),
        ("verdict", pa.string()),
        ("extracted", pa.string()),
        ("detail", pa.string()),
        ("rule_verdict", pa.string()),
        ("judge_verdict", pa.string()),
    ]
)
DISAGREEMENTS = pa.schema(
    [
        ("id", pa.string()),
        ("chain_id", pa.string()),
        ("rule_verdict", pa.string()),
        ("rule_detail", pa.string()),
        ("judge_verdict", pa.string()),
        ("judge_detail", pa.string()),
    ]
)


def chain_key(trace_id: str, intervention: str, target_t: float) -> str:
    """The resume key of one intervention item (known before the intervention runs)."""
    return content_id("chain-key", trace_id, intervention, float(target_t))


def skip_row(stage: str, item: str, reason: str, detail: str = "") -> dict[str, Any]:
    return {
        "id": content_id("skip", stage, item),
        "stage": stage,
        "item": item,
        "reason": reason,
        "detail": detail[:500],
    }


def problem_row(p: Problem) -> dict[str, Any]:
    return {
        "id": p.id,
        "domain": p.domain,
        "question": p.question,
        "answer": p.answer,
        "answer_type": str(p.answer_type),
        "source": p.source,
        "metadata": json.dumps(dict(p.metadata), sort_keys=True, default=str),
    }


def problem_from_row(row: Mapping[str, Any]) -> Problem:
    return Problem(
        domain=row["domain"],
        question=row["question"],
        answer=row["answer"],
        answer_type=row["answer_type"],
        source=row["source"],
        metadata=json.loads(row["metadata"] or "{}"),
        id=row["id"],
    )


def trace_from_row(row: Mapping[str, Any], tags: ThinkTags, reading: TraceReading | None = None) -> Trace:
    """The `Trace` of a stored trace row (``id``, ``problem_id``, ``model``, ``text``), read as the run's plan
    reads a response (``reading``; None: the project's, by its model's own think ``tags``, with
    `recovery.segment.SegmentationError` when neither is in its text)."""
    reading = TraceReading() if reading is None else reading
    return reading.trace(row["problem_id"], row["model"], row["text"], tags=tags, trace_id=row.get("id") or "")


def trace_row(t: Trace, n_tokens: int | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": t.id,
        "problem_id": t.problem_id,
        "model": t.model,
        "text": t.text,
        "closed": t.closed,
        "reasoning_chars": len(t.reasoning),
        "n_tokens": n_tokens,
        "finish_reason": finish_reason,
    }


# json.dumps(..., sort_keys=True, default=str) builds a new encoder per call; chain rows are written by the
# million, so one encoder with the same settings (and so the same text) is reused.
_OPTIONS_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def chain_row(c: Intervened, key: str | None = None) -> dict[str, Any]:
    """The stored row of an intervened chain; ``key`` is its `chain_key` when the caller already has it."""
    return {
        "id": c.id,
        "key": key or chain_key(c.trace_id, c.intervention, c.target_t),
        "trace_id": c.trace_id,
        "problem_id": c.problem_id,
        "model": c.model,
        "intervention": c.intervention,
        "category": str(c.category),
        "target_t": c.target_t,
        "actual_t": c.actual_t,
        "cut_index": c.cut_index,
        "n_steps": c.n_steps,
        "prefix": c.prefix,
        "inserted_text": c.inserted_text,
        "original_prefix_chars": c.original_prefix_chars,
        "original_reasoning_chars": c.original_reasoning_chars,
        "seed": c.seed,
        "options": _OPTIONS_ENCODER.encode(dict(c.options)),
        # The prefix without the inserted text, in characters: what length accounting keeps of the original
        # (stored so the aggregate never reads the prefixes back).
        "kept_chars": len(c.prefix) - len(c.inserted_text),
    }


def chain_from_row(row: Mapping[str, Any]) -> Intervened:
    return Intervened(
        trace_id=row["trace_id"],
        problem_id=row["problem_id"],
        model=row["model"],
        intervention=row["intervention"],
        category=row["category"],
        target_t=row["target_t"],
        actual_t=row["actual_t"],
        cut_index=row["cut_index"],
        n_steps=row["n_steps"],
        prefix=row["prefix"],
        inserted_text=row["inserted_text"],
        original_prefix_chars=row["original_prefix_chars"],
        original_reasoning_chars=row["original_reasoning_chars"],
        seed=row["seed"],
        options=json.loads(row["options"] or "{}"),
        id=row["id"],
    )
