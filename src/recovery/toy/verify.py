"""The toy world's verifier is the core grader.

Toy answers are small integers (`AnswerType.NUMERIC`) or a name / colour (`AnswerType.EXACT`), written as
``\\boxed{…}`` after ``</think>``, so `recovery.grading.grade_response` reads them like any other problem
(exact integers; case-insensitive names and colours). `grade_toy` exists so toy code has one name for it.
"""

from __future__ import annotations

from recovery.grading import grade_response
from recovery.types import Grade, Problem


def grade_toy(response: str, problem: Problem) -> Grade:
    """Grade a response (or prefix + continuation) to a toy problem with the core grader.

    >>> from recovery.toy.tasks import generate_problem
    >>> p = generate_problem(0)
    >>> grade_toy("...</think>\\n\\nThe answer is \\\\boxed{%s}." % p.answer, p).correct
    True
    """

    return grade_response(response, problem)
