"""Everything the viewer shows of one chain, read from the run's own rows: the problem and gold answer, the
original trace with the cut, the kept prefix with the intervention's text, what it replaced, and each continuation
with its grade, length change and doubt.

What an intervention replaced is found, for every kind of intervention alike, by comparing the original reasoning
up to the cut with the intervened prefix around the inserted text: what precedes the inserted text in the prefix
and what follows it are shared with the original, and what the original holds between them is what the
intervention replaced (nothing for an intervention that only inserts; the step at the cut for one that replaces
it; the whole prefix for a paraphrase). When the inserted text is not one piece of the prefix (random characters
scattered through a step), the two texts are compared character by character (`difflib`) between their longest
shared head and tail, and each piece the intervention wrote is marked where it stands.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from recovery.grading.grade import grade_part
from recovery.grading.verdict import trace_graded_part
from recovery.metrics import length_change_pct, reasoning_lengths
from recovery.run_dir.positions import rows_at
from recovery.segment import SegmentationError
from recovery.types import Problem
from recovery.viewer.chains import RunChains
from recovery.viewer.doubt import RunDoubt


@dataclass(frozen=True)
class Edit:
    """The intervened prefix split around the intervention: ``shared_head`` + ``removed`` + ``shared_tail`` is the
    original prefix, ``shared_head`` + ``added`` + ``shared_tail`` the intervened one. ``marks`` cuts ``added``
    into pieces, True for those the intervention wrote (all of it, unless it edited the original in place)."""

    shared_head: str
    removed: str
    added: str
    shared_tail: str
    marks: tuple[tuple[bool, str], ...]


def edit_of(original: str, intervened: str, inserted: str) -> Edit:
    """The `Edit` taking ``original`` (the original prefix) to ``intervened`` (the stored prefix), whose
    intervention inserted ``inserted`` (see the module doc)."""
    at = intervened.rfind(inserted) if inserted else -1
    if at >= 0:
        head, tail = intervened[:at], intervened[at + len(inserted) :]
        rest = original[len(head) :]
        if original.startswith(head) and rest.endswith(tail):
            return Edit(head, rest[: len(rest) - len(tail)], inserted, tail, ((True, inserted),))
    head_n = len(os.path.commonprefix([original, intervened]))
    rest_o, rest_i = original[head_n:], intervened[head_n:]
    tail_n = len(os.path.commonprefix([rest_o[::-1], rest_i[::-1]]))
    old, new = rest_o[: len(rest_o) - tail_n], rest_i[: len(rest_i) - tail_n]
    removed, marks = [], []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        removed.append(old[a0:a1] if op in ("replace", "delete") else "")
        if b1 > b0:
            marks.append((op != "equal", new[b0:b1]))
    return Edit(original[:head_n], "".join(removed), new, rest_o[len(rest_o) - tail_n :], tuple(marks))


@dataclass(frozen=True)
class ContinuationView:
    """One of the N continuations: its text, grade, length change and doubt units."""

    id: str
    sample_index: int
    model: str
    text: str
    verdict: str | None
    extracted: str | None
    whole_pct: float
    finish_reason: str | None
    units: list[tuple[str, bool | None]]


@dataclass(frozen=True)
class ChainView:
    """One chain (see the module doc). ``cut`` is the position in ``reasoning`` where the original prefix ends."""

    summary: dict[str, Any]
    problem: Problem | None
    reasoning: str
    trace_text: str
    trace_answer: str | None
    trace_verdict: str | None
    cut: int
    prefix: str
    inserted: str
    edit: Edit
    continuations: list[ContinuationView]
    options: str


def chain_view(chains: RunChains, doubt: RunDoubt, i: int) -> ChainView:
    """The `ChainView` of chain ``i`` of ``chains``."""
    run = chains.run
    row = chains.chain_row(i)
    problem = chains.problems.get(row["problem_id"])
    trace_row = _trace_row(chains, i)
    reasoning, answer, verdict = "", None, None
    if trace_row is not None:
        try:
            trace = run.parse_trace(trace_row)
            reasoning = trace.reasoning
            if problem is not None:
                grade = grade_part(trace_graded_part(trace), problem)
                answer, verdict = grade.extracted, str(grade.verdict)
        except SegmentationError:
            reasoning = trace_row["text"] or ""
    cut = int(row["original_prefix_chars"] or 0)
    prefix, inserted = row["prefix"] or "", row["inserted_text"] or ""
    return ChainView(
        summary=chains.summary(i),
        problem=problem,
        reasoning=reasoning,
        trace_text=trace_row["text"] if trace_row else "",
        trace_answer=answer,
        trace_verdict=verdict,
        cut=cut,
        prefix=prefix,
        inserted=inserted,
        edit=edit_of(reasoning[:cut], prefix, inserted),
        continuations=_continuations(chains, doubt, i, row),
        options=row.get("options") or "{}",
    )


def _trace_row(chains: RunChains, i: int) -> dict[str, Any] | None:
    """The stored row of chain ``i``'s original trace (None when the traces table lacks it)."""
    rows = chains.traces.positions(int(chains.codes["trace_id"][i]))[:1]
    columns = ["id", "problem_id", "model", "text"]
    return rows_at(chains.run.tables.traces, rows, columns).to_pylist()[0] if len(rows) else None


def _continuations(chains: RunChains, doubt: RunDoubt, i: int, row: dict[str, Any]) -> list[ContinuationView]:
    run = chains.run
    columns = ["id", "sample_index", "model", "text", "finish_reason"]
    texts = rows_at(run.tables.continuations, chains.continuations.positions(i), columns).to_pylist()
    grades = {
        g["id"]: g
        for g in rows_at(run.tables.grades, chains.grades.positions(i), ["id", "verdict", "extracted"]).to_pylist()
    }
    texts.sort(key=lambda c: (c["sample_index"] is None, c["sample_index"]))
    whole = np.full(len(texts), np.nan)
    if texts:
        closer = run.think_tags(row["model"])[1]
        new = reasoning_lengths(pa.array([c["text"] or "" for c in texts], pa.string()), closer)
        kept = (
            row["kept_chars"] if row.get("kept_chars") is not None else len(row["prefix"]) - len(row["inserted_text"])
        )
        whole, _ = length_change_pct(
            [kept] * len(texts),
            [row["original_prefix_chars"]] * len(texts),
            [row["original_reasoning_chars"]] * len(texts),
            new,
        )
    units = doubt.units(row["id"], [{**c, "model": c["model"] or row["model"]} for c in texts])
    out = []
    for c, pct in zip(texts, whole):
        grade = grades.get(c["id"], {})
        out.append(
            ContinuationView(
                id=c["id"],
                sample_index=int(c["sample_index"] or 0),
                model=c["model"] or row["model"],
                text=c["text"] or "",
                verdict=grade.get("verdict"),
                extracted=grade.get("extracted"),
                whole_pct=float(pct),
                finish_reason=c["finish_reason"],
                units=units.get(c["id"], []),
            )
        )
    return out
