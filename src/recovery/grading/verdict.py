"""One verdict for a continuation: which part of its text is graded, and what a continuation whose reasoning
never closed gets.

The pipeline's grades stage, the training callback's mini-benchmark and the correctness reward all decide
here, so the curve logged during training, the benchmark run afterwards and the reward agree on the same
text. A continuation starts inside the reasoning; its final answer is what follows its model's own closing
think tag (``</think>``, or EXAONE's ``</thought>``; another family's tag is text). One that never closes has no final answer under the default
``unclosed`` policy ``"no_answer"`` (the project's protocol: never correct), and is graded on its whole text
under ``"grade"`` (the authors' reference implementation, where a boxed answer inside open reasoning counts).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from recovery.grading.grade import grade_part
from recovery.segment import THINK, ThinkTags, answer_after_reasoning
from recovery.types import UNCLOSED_POLICIES, Grade, Problem, Trace, Verdict, check_unclosed

NEVER_CLOSED = Grade(Verdict.NO_ANSWER, None, "reasoning never closed")


def answer_section(text: str, tags: ThinkTags = THINK) -> str | None:
    """What follows the reasoning of continuation ``text`` by its model's own think ``tags``
    (`recovery.segment.answer_after_reasoning`), or None when its reasoning never closed. Another family's
    tags are text: an EXAONE continuation that writes ``</think>`` has not closed its ``<thought>``.

    >>> answer_section("so 4.</think>The answer is 4."), answer_section("still thinking")
    ('The answer is 4.', None)
    >>> answer_section("x</think> so 4.</thought>4", ("<thought>", "</thought>"))
    '4'
    """
    return answer_after_reasoning(text, tags)


def graded_part(text: str, *, unclosed: str = "no_answer", tags: ThinkTags = THINK) -> str | None:
    """The part of continuation ``text`` its verdict depends on: `answer_section`, or for reasoning that
    never closed the whole text under ``unclosed="grade"`` and None (no answer) under ``"no_answer"``."""
    section = answer_section(text, tags)
    if section is None and check_unclosed(unclosed) == "grade":
        return text
    return section


def graded_parts(
    texts: Sequence[str | None], *, unclosed: str = "no_answer", tags: Sequence[ThinkTags] | None = None
) -> tuple[list[str | None], Counter]:
    """`graded_part` of every text (``tags[i]``: the think tags of the model that wrote ``texts[i]``; None:
    ``<think>`` for all), and how many never closed: ``unclosed_graded`` (graded whole, ``unclosed="grade"``)
    or ``unclosed_reasoning`` (no answer)."""
    grade_unclosed = check_unclosed(unclosed) == "grade"
    reasons: Counter = Counter()
    parts: list[str | None] = []
    for i, text in enumerate(texts):
        section = answer_section(text or "", THINK if tags is None else tags[i])
        if section is None:
            reasons["unclosed_graded" if grade_unclosed else "unclosed_reasoning"] += 1
            section = (text or "") if grade_unclosed else None
        parts.append(section)
    return parts, reasons


def _after_closer(closer: str) -> str:
    """The RE2 pattern of what follows the first ``closer`` (group ``answer``)."""
    return "(?s)" + re.escape(closer) + "(?P<answer>.*)"


def graded_parts_column(texts: Any, *, unclosed: str = "no_answer", tags: Sequence[ThinkTags] | None = None):
    """`graded_parts` column-wise, for millions of rows: ``texts`` an Arrow string array; returns the graded
    parts as an Arrow string array (null: no answer) and the reasons counted.

    Rows of a model with ``<think>`` tags whose text holds no opening tag are cut after their first closing
    tag in Arrow (what `answer_section` does there); the rest (an opening tag, another model's tags) go
    through `answer_section` with their model's tags."""
    import pyarrow as pa  # lazy: the row form needs no Arrow
    import pyarrow.compute as pc

    grade_unclosed = check_unclosed(unclosed) == "grade"
    after = pc.extract_regex(texts, _after_closer(THINK[1]))
    answers = pc.if_else(pc.is_valid(after), pc.struct_field(after, [0]), pa.scalar(None, pa.string()))
    odd = pc.fill_null(pc.match_substring(texts, THINK[0]), False)
    if tags is not None:
        odd = pc.or_(odd, pa.array([pair != THINK for pair in tags], pa.bool_()))
    if odd.true_count:
        patched = answers.to_pylist()
        for i in pc.indices_nonzero(odd).to_pylist():
            patched[i] = answer_section(texts[i].as_py() or "", THINK if tags is None else tags[i])
        answers = pa.array(patched, pa.string())
    reasons: Counter = Counter()
    if answers.null_count:
        reasons["unclosed_graded" if grade_unclosed else "unclosed_reasoning"] = answers.null_count
        if grade_unclosed:  # never closed: the whole text is the graded part
            answers = pc.coalesce(answers, pc.cast(pc.fill_null(texts, ""), answers.type))
    return answers, reasons


def trace_graded_part(trace: Trace) -> str:
    """What the rule grader reads of an original trace: its answer when its reasoning closed (by its model's
    tags, as `recovery.segment.parse_trace` split it), else its whole text."""
    return trace.answer_text if trace.closed else trace.text


def grade_continuations(
    items: Sequence[tuple[str, Problem]], grader=None, *, unclosed: str = "no_answer", tags: ThinkTags = THINK
) -> list[Grade]:
    """The verdict of each ``(continuation text, problem)``, the continuations written by a model with think
    ``tags``: `NEVER_CLOSED` where `graded_part` finds no answer, else the grade of that part by ``grader`` (a
    `recovery.grading.Grader`; None: in this process), extracted from the part as it stands
    (`recovery.grading.grade.plan_part`), as the grades stage does."""
    check_unclosed(unclosed)
    parts = [graded_part(text, unclosed=unclosed, tags=tags) for text, _ in items]
    todo = [(part, problem) for part, (_, problem) in zip(parts, items) if part is not None]
    if not todo:
        graded = iter(())
    elif grader is None:
        graded = iter([grade_part(part, problem) for part, problem in todo])
    else:
        graded = iter(grader.grade_parts(todo))
    return [NEVER_CLOSED if part is None else next(graded) for part in parts]


__all__ = [
    "NEVER_CLOSED",
    "UNCLOSED_POLICIES",
    "answer_section",
    "check_unclosed",
    "grade_continuations",
    "graded_part",
    "graded_parts",
    "graded_parts_column",
    "trace_graded_part",
]
