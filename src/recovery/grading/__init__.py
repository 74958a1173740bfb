"""Answer grading: extract the final answer from a response and decide whether it is correct.

Layout: `extract` (where the answer is), `normalize` (answer cleaning, categorical normalisers), `braces`
(brace balance), `numeric` (fast exact number parsing and comparison), `compare` (an extracted answer
against the gold, by answer type), `symbolic` (the math-verify fallback and its guards), `grade` (one item,
in-process), `grader` (`Grader`: many items, math-verify in worker processes with hard per-item bounds),
`pool` (those workers, seen from the parent) and `worker` (the worker process itself).

>>> from recovery.grading import grade_answer
>>> grade_answer("50\\\\%", "0.5", "numeric").verdict.value
'correct'
"""

from recovery.grading.compare import MathVerifyJob
from recovery.grading.extract import answer_part, extract_answer, last_boxed
from recovery.grading.grade import (
    DEFAULT_TIMEOUT_S,
    SOURCE_TOLERANCES,
    grade_answer,
    grade_response,
    plan_answer,
    plan_extracted,
    plan_response,
    run_job,
    tolerances_for,
)
from recovery.grading.grader import Grader
from recovery.grading.normalize import (
    clean_answer,
    normalize_choice,
    normalize_choices,
    normalize_dyck,
    normalize_exact,
    normalize_label,
)
from recovery.grading.numeric import (
    ParsedNumber,
    numbers_equal,
    numbers_match,
    numeric_refusal,
    parse_number,
    parse_numeric,
)
from recovery.grading.symbolic import screen_expression

#: The version of the rule grader's verdicts. Raise it whenever a change can change a verdict: runs graded by
#: another version re-grade their stored continuations (`recovery.pipeline.grader_version`).
#: 2: math answers read as math-verify 0.9 reads them (`recovery.grading.reading`).
GRADER_VERSION = 2

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GRADER_VERSION",
    "SOURCE_TOLERANCES",
    "Grader",
    "MathVerifyJob",
    "ParsedNumber",
    "answer_part",
    "clean_answer",
    "extract_answer",
    "grade_answer",
    "grade_response",
    "last_boxed",
    "normalize_choice",
    "normalize_choices",
    "normalize_dyck",
    "normalize_exact",
    "normalize_label",
    "numbers_equal",
    "numbers_match",
    "numeric_refusal",
    "parse_number",
    "parse_numeric",
    "plan_answer",
    "plan_extracted",
    "plan_response",
    "run_job",
    "screen_expression",
    "tolerances_for",
]
