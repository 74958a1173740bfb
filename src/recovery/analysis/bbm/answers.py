"""The stored answers: their resume key, Parquet schema and rows, and reading them back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from recovery.analysis.bbm.config import BBMSamplingConfig
from recovery.analysis.bbm.data import BBMItem
from recovery.analysis.bbm.prompt import PROMPT_VERSION, ParsedAnswer, parse_mistake_answer
from recovery.analysis.bbm.scoring import CORRECT, GENERATION_ERROR, score_answer
from recovery.ids import content_id
from recovery.model_config import ModelConfig
from recovery.report.sections_store import analysis_dir
from recovery.store import Table as StoreTable

NAME = "bbm"


def answer_key(model: ModelConfig, item: BBMItem, cfg: BBMSamplingConfig) -> str:
    """The resume key of one answer: model, item, prompt version and decoding (any change → new answers)."""
    return content_id(
        "bbm-answer",
        model.name,
        model.path,
        model.spec,
        item.id,
        PROMPT_VERSION,
        asdict(cfg),
        [model.temperature, model.top_p, model.top_k],
    )


ANSWERS = pa.schema(
    [
        ("id", pa.string()),
        ("model", pa.string()),
        ("task", pa.string()),
        ("item_id", pa.string()),
        ("item_index", pa.int64()),
        ("n_steps", pa.int64()),
        ("gold_step", pa.int64()),
        ("predicted", pa.string()),
        ("predicted_step", pa.int64()),
        ("correct", pa.bool_()),
        ("outcome", pa.string()),
        ("detail", pa.string()),
        ("reply", pa.string()),
        ("n_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int64()),
    ]
)


def answers_table(out: str | Path) -> StoreTable:
    """``OUT/analysis/bbm/answers``: one Parquet row per (model, item) answer."""
    return StoreTable(analysis_dir(out, NAME) / "answers")


def answer_row(
    key: str,
    model: str,
    item: BBMItem,
    reply: str | None,
    *,
    n_tokens: int | None = None,
    finish_reason: str | None = None,
    prompt_tokens: int | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The stored row of one answer (a generation error is stored too, with its message, and retried)."""
    if error is not None or reply is None:
        parsed, outcome, detail = ParsedAnswer("unparseable"), GENERATION_ERROR, (error or "no reply")[:500]
    else:
        parsed = parse_mistake_answer(reply, finish_reason=finish_reason)
        outcome, detail = score_answer(item, parsed), parsed.detail
    return {
        "id": key,
        "model": model,
        "task": item.task,
        "item_id": item.id,
        "item_index": item.index,
        "n_steps": len(item.steps),
        "gold_step": item.gold_step,
        "predicted": parsed.kind,
        "predicted_step": parsed.step,
        "correct": outcome == CORRECT,
        "outcome": outcome,
        "detail": detail,
        "reply": reply,
        "n_tokens": n_tokens,
        "finish_reason": finish_reason,
        "prompt_tokens": prompt_tokens,
    }


def read_answers(table: StoreTable, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Stored answers (only ``keys`` when given), one per key: a real answer wins over a generation error
    stored before it was retried."""
    wanted = None if keys is None else set(keys)
    best: dict[str, dict[str, Any]] = {}
    for row in table.iter_rows():
        if wanted is not None and row["id"] not in wanted:
            continue
        held = best.get(row["id"])
        if held is None or held["outcome"] == GENERATION_ERROR:
            best[row["id"]] = row
    return list(best.values())
