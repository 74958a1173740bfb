"""One verdict for a continuation: which part of its text is graded, and what a continuation whose reasoning
never closed gets.

The pipeline's grades stage, the training callback's mini-benchmark and the correctness reward all decide
here, so the curve logged during training, the benchmark run afterwards and the reward agree on the same
text. A continuation starts inside the reasoning; its final answer is what follows the closing think tag
(``</think>``, or EXAONE's ``</thought>``). One that never closes has no final answer under the default
``unclosed`` policy ``"no_answer"`` (the project's protocol: never correct), and is graded on its whole text
under ``"grade"`` (the authors' reference implementation, where a boxed answer inside open reasoning counts).
"""

from __future__ import annotations

from collections.abc import Sequence

from recovery.grading.extract import answer_part
from recovery.grading.grade import grade_response
from recovery.segment import THINK_TAGS
from recovery.types import UNCLOSED_POLICIES, Grade, Problem, Verdict, check_unclosed

NEVER_CLOSED = Grade(Verdict.NO_ANSWER, None, "reasoning never closed")


def answer_section(text: str) -> str | None:
    """What follows the closing think tag of continuation ``text``, or None when its reasoning never closed.

    Continuations normally hold a closing tag and no opening one; that common case is cut after the first
    closing tag, anything else goes through `answer_part`'s full tag rules.

    >>> answer_section("so 4.</think>The answer is 4."), answer_section("still thinking")
    ('The answer is 4.', None)
    """
    if not any(open_tag in text for open_tag, _ in THINK_TAGS):
        for _, close in THINK_TAGS:
            end = text.find(close)
            if end >= 0:
                return text[end + len(close) :]
        return None
    if not any(close in text for _, close in THINK_TAGS):
        return None
    return answer_part(text)


def graded_part(text: str, *, unclosed: str = "no_answer") -> str | None:
    """The part of continuation ``text`` its verdict depends on: `answer_section`, or for reasoning that
    never closed the whole text under ``unclosed="grade"`` and None (no answer) under ``"no_answer"``."""
    section = answer_section(text)
    if section is None and check_unclosed(unclosed) == "grade":
        return text
    return section


def grade_continuations(
    items: Sequence[tuple[str, Problem]], grader=None, *, unclosed: str = "no_answer"
) -> list[Grade]:
    """The verdict of each ``(continuation text, problem)``: `NEVER_CLOSED` where `graded_part` finds no
    answer, else the grade of that part by ``grader`` (a `recovery.grading.Grader`; None: in this process with
    `grade_response`), extracted and compared as `grade_response` does."""
    check_unclosed(unclosed)
    parts = [graded_part(text, unclosed=unclosed) for text, _ in items]
    todo = [(part, problem) for part, (_, problem) in zip(parts, items) if part is not None]
    if not todo:
        graded = iter(())
    elif grader is None:
        graded = iter([grade_response(part, problem) for part, problem in todo])
    else:
        graded = iter(grader.grade_many(todo))
    return [NEVER_CLOSED if part is None else next(graded) for part in parts]


__all__ = [
    "NEVER_CLOSED",
    "UNCLOSED_POLICIES",
    "answer_section",
    "check_unclosed",
    "grade_continuations",
    "graded_part",
]
