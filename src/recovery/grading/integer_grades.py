"""Column-wise grading of the commonest case: a plain integer in the only box against an integer gold.

Numeric benchmarks mostly end in ``\\boxed{<integer>}`` and most golds are integers, so the grading
workers (`recovery.pipeline.rule_grading`) settle those (answer part, problem) pairs in Arrow and send only
the rest through the general grader. It lives with the grader it must agree with: the verdict in another
form, not a rule of its own. The shortcut gives exactly what the general path gives (same verdict, extracted
text and detail; tested against it): it applies only where the general path compares the numbers itself, i.e.

- the answer part holds no think tag (so taking its answer part again changes nothing) and
  `recovery.grading.reading.single_box_number` reads a plain integer from it (its only box holds one and
  math-verify would read that box as the answer; ASCII digits, no leading zero, at most 15 of them);
- the problem's answer type is numeric or expression, it has no tolerances, and its gold answer is a
  plain integer (`recovery.grading.reading.simple_number`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from recovery.grading.extract import PLAIN_INTEGER
from recovery.grading.grade import integer_gold_value, tolerances_for
from recovery.grading.reading import simple_number, single_box_number
from recovery.segment import THINK_TAGS
from recovery.types import AnswerType, Problem, Verdict

_PLAIN_INTEGER = re.compile(PLAIN_INTEGER)
_THINK_TAG = "|".join(re.escape(tag) for pair in THINK_TAGS for tag in pair)
_EXACT_TYPES = (AnswerType.NUMERIC, AnswerType.EXPRESSION)
_MAX_EXACT = 2**63 - 1


def integer_gold(problem: Problem) -> int | None:
    """The problem's gold as an int when the shortcut applies to it, else None."""
    if problem.answer_type not in _EXACT_TYPES or tolerances_for(problem) != (None, None):
        return None
    if simple_number(problem.answer) is None:
        return None  # a gold the general path hands to math-verify (units, LaTeX, separators)
    value = integer_gold_value(problem.answer)
    return value if value is not None and -_MAX_EXACT <= value <= _MAX_EXACT else None


def integer_golds(problems: Iterable[Problem]) -> pa.Array:
    """`integer_gold` of each problem, as an int64 array (null where the shortcut does not apply)."""
    return pa.array([integer_gold(p) for p in problems], pa.int64())


def plain_integer_grades(answers: pa.Array, golds: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Grade answer parts against integer golds (parallel arrays) where the shortcut applies.

    Returns ``(applies, verdict, extracted, detail)``: a boolean mask and, where it is true, the grade's
    stored columns (elsewhere their values are meaningless and the general grader must decide).
    """
    # Which box math-verify reads is decided per distinct answer part (a regex over the part's text).
    numbers = [_boxed_integer(text) for text in answers.to_pylist()]
    number = pa.array(numbers, pa.string())
    no_tag = pc.invert(pc.match_substring_regex(answers, _THINK_TAG))
    applies = pc.fill_null(pc.and_(pc.and_(pc.is_valid(number), no_tag), pc.is_valid(golds)), False)
    predicted = pc.cast(pc.if_else(applies, number, "0"), pa.int64())
    correct = pc.fill_null(pc.equal(predicted, golds), False)
    verdict = pc.if_else(correct, Verdict.CORRECT.value, Verdict.WRONG.value)
    # The general path writes f"{int(pred)} {'=' or '≠'} {gold} (exact)"; the matched digits are already
    # int(pred)'s text (no leading zero, no plus sign).
    detail = pc.binary_join_element_wise(
        number, pc.if_else(correct, " = ", " ≠ "), pc.cast(golds, pa.string()), " (exact)", ""
    )
    return applies, verdict, number, detail


def _boxed_integer(text: str | None) -> str | None:
    """The integer of `single_box_number` when it is a plain integer as the general path writes it."""
    number = None if text is None else single_box_number(text)
    return number if number is not None and _PLAIN_INTEGER.fullmatch(number) else None
