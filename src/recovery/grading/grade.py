"""Grade one answer against its reference: fast paths first, math-verify only for genuine expressions.

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
4. otherwise (NuminaMath and the like) math-verify's own rule, reproduced exactly on plain numbers:
   integers and fractions must be equal, decimals are compared after rounding to 6 places.

Percentages match their written value or that value / 100 (see `recovery.grading.numeric`).
Categorical answer types (multiple choice, multi-select, yes/no, true/false, valid/invalid, Dyck) are
compared after normalisation and never touch math-verify; a multi-select answer must name exactly the gold
set of letters (JEEBench's full-credit case).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recovery.grading.extract import PLAIN_INTEGER, answer_part, extract_answer, last_boxed
from recovery.grading.normalize import (
    clean_answer,
    normalize_choice,
    normalize_choices,
    normalize_dyck,
    normalize_exact,
    normalize_label,
)
from recovery.grading.numeric import ParsedNumber, numeric_refusal, parse_numeric, parsed_numbers_match
from recovery.grading.symbolic import compare_with_math_verify
from recovery.types import AnswerType, Grade, Problem, Verdict

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_ANSWER_CHARS",
    "SOURCE_TOLERANCES",
    "MathVerifyJob",
    "tolerances_for",
    "plan_answer",
    "plan_response",
    "grade_answer",
    "grade_response",
    "run_job",
]

#: Per-item budget for math-verify (seconds of CPU time, see `recovery.grading.symbolic.cpu_budget`).
DEFAULT_TIMEOUT_S = 5.0
#: A "final answer" longer than this (with no box inside) is graded wrong without further parsing.
MAX_ANSWER_CHARS = 10_000
#: (rel_tol, abs_tol) by dataset; keys match ``Problem.source`` case-insensitively as substrings.
SOURCE_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "scibench": (0.05, 0.0),  # SciBench paper: 5 % relative tolerance (see module docstring)
    "jeebench": (0.0, 0.01),  # jeebench compute_metrics.py: abs(g - r) <= 0.01
}
_TOLERANT_TYPES = (AnswerType.NUMERIC, AnswerType.EXPRESSION)
_LABEL_TYPES = (AnswerType.YES_NO, AnswerType.TRUE_FALSE, AnswerType.VALID_INVALID)


@dataclass(frozen=True, slots=True)
class MathVerifyJob:
    """A comparison the fast paths could not settle; run it with math-verify (in-process or in a pool)."""

    pred: str
    gold: str
    rel_tol: float | None
    abs_tol: float | None
    extracted: str | None


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


def _show(number: ParsedNumber) -> str:
    v = number.value
    text = str(v.numerator) if v.denominator == 1 else f"{float(v):.10g}"
    return text + ("%" if number.percent else "")


def _unwrap(predicted: str) -> Grade | str:
    """The answer inside ``predicted`` (its last box when it has one), cleaned; a Grade when there is none."""
    if "\\boxed" in predicted or "\\fbox" in predicted:
        boxed = last_boxed(predicted)
        if boxed is None:
            return Grade(Verdict.NO_ANSWER, None, "the last \\boxed{} is empty or never closed")
        predicted = boxed
    if len(predicted) > MAX_ANSWER_CHARS:
        return Grade(Verdict.WRONG, None, f"answer too long ({len(predicted):,} characters) to be a final answer")
    return clean_answer(predicted)


_CANON_DROP = re.compile(r"\\(?:left|right|displaystyle|!|,|;|:)|\s|\$")


def _canon(expr: str) -> str:
    return _CANON_DROP.sub("", expr.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac"))


def _compare_numbers(pred: ParsedNumber, gold: ParsedNumber, extracted: str, rel, tol) -> Grade:
    ok = parsed_numbers_match(pred, gold, rel_tol=rel, abs_tol=tol)
    if rel is None and tol is None:
        how = "6 decimals" if pred.is_float or gold.is_float else "exact"
    else:
        how = f"rel_tol={rel or 0}, abs_tol={tol or 0}"
    sign = "=" if ok else "≠"
    return Grade(Verdict.CORRECT if ok else Verdict.WRONG, extracted, f"{_show(pred)} {sign} {_show(gold)} ({how})")


def _plan_categorical(pred: str, gold: str, answer_type: AnswerType) -> Grade:
    if answer_type is AnswerType.MULTIPLE_CHOICE:
        normalize, what = normalize_choice, "an option letter"
    elif answer_type is AnswerType.MULTI_SELECT:
        normalize, what = normalize_choices, "a set of option letters"
    elif answer_type in _LABEL_TYPES:
        normalize, what = (lambda s: normalize_label(s, answer_type)), "a " + answer_type.value.replace("_", "/")
    elif answer_type is AnswerType.DYCK:
        normalize, what = normalize_dyck, "a closing-bracket sequence"
    else:
        normalize, what = normalize_exact, "text"
    gold_norm = normalize(gold)
    if not gold_norm:
        return Grade(Verdict.UNPARSABLE_GOLD, pred, f"gold answer {gold[:80]!r} is not {what}")
    pred_norm = normalize(pred)
    if not pred_norm:
        return Grade(Verdict.WRONG, pred, f"could not read {what} from {pred[:80]!r}")
    if pred_norm == gold_norm:
        return Grade(Verdict.CORRECT, pred_norm, f"{pred_norm!r} matches")
    return Grade(Verdict.WRONG, pred_norm, f"{pred_norm!r} ≠ {gold_norm!r}")


def plan_answer(
    predicted: str | None,
    gold: str,
    answer_type: AnswerType | str,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    use_math_verify: bool = True,
) -> Grade | MathVerifyJob:
    """Settle the comparison with the fast paths, or say what math-verify must compare.

    Arguments are as for `grade_answer`. Never calls math-verify and never raises for odd text; raises
    ``TypeError``/``ValueError`` for arguments of the wrong type or an unknown answer type.
    """
    _check_text("predicted", predicted, optional=True)
    _check_text("gold", gold, optional=False)
    if type(answer_type) is not AnswerType:
        answer_type = AnswerType(answer_type)
    rel, tol = _check_tol("rel_tol", rel_tol), _check_tol("abs_tol", abs_tol)

    if predicted is None:
        return Grade(Verdict.NO_ANSWER, None, "no final answer found")
    if rel is None and tol is None and answer_type in _TOLERANT_TYPES:
        plain = plain_integer_grade(predicted, gold)
        if plain is not None:
            return plain
    return _plan_general(predicted, gold, answer_type, rel, tol, use_math_verify)


def _plan_general(
    predicted: str, gold: str, answer_type: AnswerType, rel: float | None, tol: float | None, use_math_verify: bool
) -> Grade | MathVerifyJob:
    """`plan_answer` past its argument checks and the plain-integer shortcut: every answer form."""
    pred = _unwrap(predicted)
    if isinstance(pred, Grade):
        return pred
    if not pred:
        return Grade(Verdict.NO_ANSWER, None, "empty answer")
    if not gold.strip():
        return Grade(Verdict.UNPARSABLE_GOLD, pred, "gold answer is empty")

    if answer_type not in _TOLERANT_TYPES:
        return _plan_categorical(pred, gold, answer_type)

    gold_clean, gold_num = _gold_number(gold)
    if answer_type is AnswerType.EXPRESSION and "=" in pred and "=" not in gold_clean:
        rhs = clean_answer(pred.rsplit("=", 1)[1])  # "x = 5" vs "5": compare the value (as math-verify does)
        pred = rhs or pred
    pred_num = parse_numeric(pred)
    if gold_num is not None and pred_num is not None:
        return _compare_numbers(pred_num, gold_num, pred, rel, tol)
    if gold_num is None and (reason := numeric_refusal(gold_clean)):
        return Grade(Verdict.UNPARSABLE_GOLD, pred, f"gold answer {gold_clean[:80]!r}: {reason}")
    if pred_num is None and (reason := numeric_refusal(pred)):
        return Grade(Verdict.WRONG, pred, f"prediction {pred[:80]!r}: {reason}")
    if answer_type is AnswerType.EXPRESSION and _canon(pred) == _canon(gold_clean):
        return Grade(Verdict.CORRECT, pred, "identical expressions")
    if gold_num is not None and not re.search(r"[\d\\π]|\bpi\b|^e$", pred):
        return Grade(Verdict.WRONG, pred, f"{pred[:80]!r} is not a number")
    if not use_math_verify:
        if answer_type is AnswerType.EXPRESSION:
            return Grade(Verdict.WRONG, pred, f"{pred[:80]!r} differs from {gold_clean[:80]!r} (math-verify off)")
        if gold_num is None:
            return Grade(Verdict.UNPARSABLE_GOLD, pred, f"gold {gold[:80]!r} is not a plain number (math-verify off)")
        return Grade(Verdict.WRONG, pred, f"{pred[:80]!r} is not a plain number (math-verify off)")
    return MathVerifyJob(pred, gold_clean, rel, tol, pred)


_PLAIN_INTEGER = re.compile(PLAIN_INTEGER)


def plain_integer_grade(predicted: str, gold: str) -> Grade | None:
    """The exact comparison of a plain integer answer with an integer gold answer, or None when either is
    anything else (then `plan_answer`'s general path decides).

    Most numeric answers are plain integers; this skips the general parsing (about 4× faster) and gives
    the same verdict, extracted text and detail as the general path (tested against it).

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
    _, gold_num = _gold_number(gold)
    if gold_num is None or gold_num.is_float or gold_num.percent or gold_num.value.denominator != 1:
        return None
    return gold_num.value.numerator


@functools.lru_cache(maxsize=4096)
def _gold_number(gold: str) -> tuple[str, ParsedNumber | None]:
    """The cleaned gold answer and its number (None if it is not a plain number). Cached: a run grades
    thousands of continuations per problem against the same gold."""
    gold_clean = clean_answer(gold)
    return gold_clean, parse_numeric(gold_clean)


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
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    planned = plan_answer(
        predicted, gold, answer_type, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify
    )
    if isinstance(planned, Grade):
        return planned
    return run_job(planned, timeout_s=timeout_s)


def run_job(job: MathVerifyJob, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Grade:
    """Run a `MathVerifyJob` with math-verify in this process."""
    verdict, detail = compare_with_math_verify(
        job.pred, job.gold, rel_tol=job.rel_tol, abs_tol=job.abs_tol, timeout_s=timeout_s
    )
    return Grade(verdict, job.extracted, detail)


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
    extracted = extract_answer(answer_part(response), problem.answer_type)
    return plan_extracted(extracted, problem, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify)


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
    if rel_tol is None and abs_tol is None and problem.answer_type in _TOLERANT_TYPES:
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
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    planned = plan_response(response, problem, rel_tol=rel_tol, abs_tol=abs_tol, use_math_verify=use_math_verify)
    if isinstance(planned, Grade):
        return planned
    return run_job(planned, timeout_s=timeout_s)
