"""Grade one answer against its reference: fast paths first, math-verify only for genuine expressions.

The entry points: `plan_answer` / `plan_response` / `plan_extracted` check their arguments and settle
what they can in this process (`recovery.grading.compare`), returning a `Grade` or a `MathVerifyJob`;
`grade_answer` / `grade_response` also run that job with math-verify here (`run_job`).

Tolerances for numeric answers, in order of precedence:

1. ``rel_tol`` / ``abs_tol`` passed by the caller;
2. ``problem.metadata["rel_tol"]`` / ``["abs_tol"]`` (either one switches to tolerance mode);
3. `SOURCE_TOLERANCES`, matched as a case-insensitive substring of ``problem.source``:

   * SciBench — relative tolerance 5 %: the SciBench paper (Wang et al., ICML 2024, arXiv 2307.10635)
     scores textbook answers as correct within a 5 % relative tolerance. (Its released scorer,
     mandyyyyii/scibench ``eval/eval_zero.py::equiv``, is looser: ``math.isclose`` with ``abs_tol=0.1``
     when the gold is ≥ 1, else ``rel_tol=0.1``; pass ``rel_tol``/``abs_tol`` to reproduce it.)
   * JEEBench — absolute tolerance 0.01: dair-iitd/jeebench ``compute_metrics.py::compute_score`` marks an
     Integer/Numeric response correct when ``abs(gold - response) <= 0.01``.
4. otherwise (NuminaMath and the like) math-verify decides, reading the answer as it reads it
   (`recovery.grading.compare.plan_math_text`): a response holding LaTeX math is handed to it whole, and
   only plain numbers it provably reads alike are compared here, by its rule (integers and fractions must
   be equal, decimals are compared after rounding to 6 places; percentages are always its to decide).

In tolerance mode a percentage matches its written value or that value / 100 (see
`recovery.grading.numeric`).
Categorical answer types (multiple choice, multi-select, yes/no, true/false, valid/invalid, Dyck) are
compared after normalisation and never touch math-verify; a multi-select answer must name exactly the gold
set of letters (JEEBench's full-credit case).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from recovery.grading.compare import TOLERANT_TYPES, MathVerifyJob, gold_number, plan_general, plan_math_text
from recovery.grading.extract import PLAIN_INTEGER, answer_part, extract_answer
from recovery.grading.normalize import normalize_dyck
from recovery.grading.symbolic import compare_with_math_verify
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SOURCE_TOLERANCES",
    "tolerances_for",
    "plan_answer",
    "plan_response",
    "plan_extracted",
    "plain_integer_grade",
    "integer_gold_value",
    "grade_answer",
    "grade_part",
    "grade_response",
    "run_job",
]

#: Per-item budget for math-verify (seconds of CPU time, see `recovery.grading.symbolic.cpu_budget`).
DEFAULT_TIMEOUT_S = 5.0
#: (rel_tol, abs_tol) by dataset; keys match ``Problem.source`` case-insensitively as substrings.
SOURCE_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "scibench": (0.05, 0.0),  # SciBench paper: 5 % relative tolerance (see module docstring)
    "jeebench": (0.0, 0.01),  # jeebench compute_metrics.py: abs(g - r) <= 0.01
}
_PLAIN_INTEGER = re.compile(PLAIN_INTEGER)


def check_positive(name: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is a number > 0 (a time budget or cap named ``name``)."""
    if not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name} must be > 0, got {value!r}")


def _check_tol(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and ≥ 0, got {value!r}")
    return float(value)


def _check_text(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(
            f"{name} must be str, got {type(value).__name__}; decode it first "
            "(e.g. value.decode('utf-8', errors='replace'))"
        )
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str{' or None' if optional else ''}, got {type(value).__name__}")


def plan_answer(
    predicted: str | None,
    gold: str,
    answer_type: AnswerType | str,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
    whole_answer: bool = True,
) -> Grade | MathVerifyJob:
    """Settle the comparison with the fast paths, or say what math-verify must compare.

    Arguments are as for `grade_answer`; ``whole_answer=False`` says that ``predicted`` is a response's
    answer part rather than an answer on its own (`recovery.grading.compare.plan_math_text`). Never calls
    math-verify and never raises for odd text; raises ``TypeError``/``ValueError`` for arguments of the
    wrong type or an unknown answer type.
    """
    _check_text("predicted", predicted, optional=True)
    _check_text("gold", gold, optional=False)
    if type(answer_type) is not AnswerType:
        answer_type = AnswerType(answer_type)
    rel, tol = _check_tol("rel_tol", rel_tol), _check_tol("abs_tol", abs_tol)

    if predicted is None:
        return Grade(Verdict.NO_ANSWER, None, "no final answer found")
    if rel is None and tol is None and answer_type in TOLERANT_TYPES:
        plain = plain_integer_grade(predicted, gold)
        if plain is not None:
            return plain
        return plan_math_text(predicted, gold, answer_type, use_math_verify, whole_answer=whole_answer)
    return plan_general(predicted, gold, answer_type, rel, tol, use_math_verify)


def plain_integer_grade(predicted: str, gold: str) -> Grade | None:
    """The exact comparison of a plain integer answer with an integer gold answer, or None when either is
    anything else (then `plan_answer`'s general path decides).

    Most numeric answers are plain integers; this skips the general parsing and gives the same verdict,
    extracted text and detail as the general path (tested against it).

    >>> plain_integer_grade("12", "12.0") is None, plain_integer_grade("-3", "3").detail
    (True, '-3 ≠ 3 (exact)')
    """
    if not _PLAIN_INTEGER.fullmatch(predicted):
        return None
    gold_value = integer_gold_value(gold)
    if gold_value is None:
        return None
    pred_value = int(predicted)
    ok = pred_value == gold_value
    detail = f"{pred_value} {'=' if ok else '≠'} {gold_value} (exact)"
    return Grade(Verdict.CORRECT if ok else Verdict.WRONG, predicted, detail)


def integer_gold_value(gold: str) -> int | None:
    """The gold answer as an int when it is a plain integer (not a decimal, percentage or fraction), the
    case the plain-integer comparison settles exactly; else None."""
    _, gold_num = gold_number(gold)
    if gold_num is None or gold_num.is_float or gold_num.percent or gold_num.value.denominator != 1:
        return None
    return gold_num.value.numerator


def grade_answer(
    predicted: str | None,
    gold: str,
    answer_type: AnswerType | str,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Grade:
    """Grade an extracted answer (or any text holding a ``\\boxed{}`` answer) against the gold answer.

    Runs in this process. Plain numbers, categorical answers and identical expressions are settled
    without math-verify; other expressions go to math-verify with a budget of ``timeout_s`` seconds of CPU
    time (main thread only — use `recovery.grading.Grader` for hard bounds and for many items). ``rel_tol``/``abs_tol`` switch
    numeric comparison to ``math.isclose``; without them plain numbers follow math-verify's rule.

    >>> grade_answer(r"\\boxed{\\frac{1}{2}}", "0.5", "numeric").verdict
    <Verdict.CORRECT: 'correct'>
    >>> grade_answer("1,234", "1234", "numeric").detail
    '1234 = 1234 (exact)'
    >>> grade_answer("104", "100", "numeric", rel_tol=0.05).correct
    True
    >>> grade_answer(None, "(C)", "multiple_choice").verdict
    <Verdict.NO_ANSWER: 'no_answer'>
    """
    check_positive("timeout_s", timeout_s)
    planned = plan_answer(
        predicted, gold, answer_type, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify
    )
    return _settle(planned, timeout_s)


def run_job(job: MathVerifyJob, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Grade:
    """Run a `MathVerifyJob` with math-verify in this process."""
    verdict, detail = compare_with_math_verify(
        job.pred, job.gold, rel_tol=job.rel_tol, abs_tol=job.abs_tol, timeout_s=timeout_s
    )
    return Grade(verdict, job.extracted, detail)


def _settle(planned: Grade | MathVerifyJob, timeout_s: float) -> Grade:
    """A planned grade as it is, or its math-verify job run in this process."""
    return planned if isinstance(planned, Grade) else run_job(planned, timeout_s=timeout_s)


def tolerances_for(problem: Problem) -> tuple[float | None, float | None]:
    """(rel_tol, abs_tol) for a problem: its metadata, else `SOURCE_TOLERANCES`, else (None, None)."""
    metadata = problem.metadata
    if "rel_tol" in metadata or "abs_tol" in metadata:
        return _check_tol("rel_tol", metadata.get("rel_tol")), _check_tol("abs_tol", metadata.get("abs_tol"))
    source = problem.source.casefold()
    for key, tolerances in SOURCE_TOLERANCES.items():
        if key in source:
            return tolerances
    return None, None


def _dyck_input(question: str) -> str | None:
    match = None
    for match in re.finditer(r"Input:\s*([^\n]*)", question):  # noqa: B007 — keeps the last match
        pass
    return normalize_dyck(match.group(1)) if match else None


def plan_response(
    response: str | None,
    problem: Problem,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
) -> Grade | MathVerifyJob:
    """`plan_answer` for a whole response: take its answer part, extract, pick tolerances."""
    _check_text("response", response, optional=True)
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
    if response is None:
        return Grade(Verdict.NO_ANSWER, None, "no response")
    return _plan_text(answer_part(response), problem, rel_tol, abs_tol, use_math_verify)


def plan_part(part: str | None, problem: Problem, *, use_math_verify: bool = True) -> Grade | MathVerifyJob:
    """`plan_response` for an answer part already cut from its response by the model's own think tags
    (`recovery.grading.verdict.graded_part`): extracted as it stands, never cut again, so a tag of another
    family inside it stays text."""
    _check_text("answer part", part, optional=True)
    if part is None:
        return Grade(Verdict.NO_ANSWER, None, "no response")
    return _plan_text(part, problem, None, None, use_math_verify)


def _plan_text(
    text: str, problem: Problem, rel_tol: float | None, abs_tol: float | None, use_math_verify: bool
) -> Grade | MathVerifyJob:
    """An answer part graded against its problem: a math answer without tolerances as written (which of its
    boxes and sentences is the answer is math-verify's reading, `plan_math_text`); any other answer
    extracted first (`plan_extracted`)."""
    if problem.answer_type in TOLERANT_TYPES and rel_tol is None and abs_tol is None:
        if tolerances_for(problem) == (None, None):
            return plan_answer(
                text, problem.answer, problem.answer_type, use_math_verify=use_math_verify, whole_answer=False
            )
    extracted = extract_answer(text, problem.answer_type)
    return plan_extracted(extracted, problem, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify)


def grade_part(part: str | None, problem: Problem, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Grade:
    """`plan_part` settled in this process: the grade of an answer part."""
    check_positive("timeout_s", timeout_s)
    return _settle(plan_part(part, problem), timeout_s)


def plan_extracted(
    extracted: str | None,
    problem: Problem,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
) -> Grade | MathVerifyJob:
    """The second half of `plan_response`: compare an answer already taken out of a response with
    ``extract_answer(answer_part(response), problem.answer_type)``. Extraction depends only on the text and
    the answer type, so callers grading many responses may extract each distinct answer text once."""
    if extracted is None:
        return Grade(Verdict.NO_ANSWER, None, "no final answer found")
    if problem.answer_type is AnswerType.DYCK:
        # Models sometimes repeat the whole sequence; BBH's target is only the closing part.
        prefix = _dyck_input(problem.question)
        if prefix and extracted.startswith(prefix + " "):
            extracted = extracted[len(prefix) + 1 :]
    if rel_tol is None and abs_tol is None and problem.answer_type in TOLERANT_TYPES:
        rel_tol, abs_tol = tolerances_for(problem)
    return plan_answer(
        extracted,
        problem.answer,
        problem.answer_type,
        rel_tol=rel_tol,
        abs_tol=abs_tol,
        use_math_verify=use_math_verify,
    )


def grade_response(
    response: str | None,
    problem: Problem,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Grade:
    """Grade a model response (or a continuation) against ``problem.answer``, in this process.

    The answer is looked for after the closing think tag (`answer_part`), extracted per
    ``problem.answer_type`` (`extract_answer`) and compared with `grade_answer`, with tolerances from the
    arguments, ``problem.metadata`` or `SOURCE_TOLERANCES`.

    >>> p = Problem("science", "q", "89,034.79", "numeric", "scibench/diff")
    >>> grade_response("<think>...</think>The answer is $\\\\boxed{89{,}000}$.", p).correct
    True
    """
    check_positive("timeout_s", timeout_s)
    planned = plan_response(response, problem, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify)
    return _settle(planned, timeout_s)
