"""Compare an extracted answer with the gold answer, by answer type, without math-verify.

Categorical answers (multiple choice, multi-select, labels, Dyck, exact text) are compared after
normalisation (`recovery.grading.normalize`). Math answers without tolerances are read as math-verify reads
them (`plan_math_text`, `recovery.grading.reading`); with tolerances, numbers are compared within them
(`recovery.grading.numeric`). What the fast paths cannot settle becomes a `MathVerifyJob`, for math-verify
to decide (`recovery.grading.symbolic`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from recovery.grading.extract import MAX_SCAN_CHARS, extract_answer, last_boxed
from recovery.grading.normalize import clean_answer, normalize_exact, normalizer
from recovery.grading.numeric import ParsedNumber, numeric_refusal, parse_numeric, parsed_numbers_match
from recovery.grading.reading import (
    has_latex_command,
    has_math_markup,
    join_thin_space_groups,
    plain_answer_first,
    plain_decimal_comma,
    simple_number,
    single_box_number,
)
from recovery.types import AnswerType, Grade, Verdict

__all__ = ["MAX_ANSWER_CHARS", "TOLERANT_TYPES", "MathVerifyJob", "gold_number", "plan_general", "plan_math_text"]

#: A "final answer" longer than this (with no box inside) is graded wrong without further parsing.
MAX_ANSWER_CHARS = 10_000
#: The answer types compared as numbers or expressions, where tolerances apply.
TOLERANT_TYPES = (AnswerType.NUMERIC, AnswerType.EXPRESSION)
_CANON_DROP = re.compile(r"\\(?:left|right|displaystyle|!|,|;|:)|\s|\$")


@dataclass(frozen=True, slots=True)
class MathVerifyJob:
    """A comparison the fast paths could not settle; run it with math-verify (in-process or in a pool).

    ``pred`` is the text math-verify parses as it stands: a response's answer part holding LaTeX math, or an
    answer already taken out of plain text and put between ``$`` signs; ``gold`` is put between ``$`` signs
    when it holds no math delimiters (`recovery.grading.symbolic`). ``extracted`` is what the grade shows."""

    pred: str
    gold: str
    rel_tol: float | None
    abs_tol: float | None
    extracted: str | None


def plan_general(
    predicted: str, gold: str, answer_type: AnswerType, rel: float | None, tol: float | None, use_math_verify: bool
) -> Grade | MathVerifyJob:
    """`recovery.grading.grade.plan_answer` past its argument checks and the plain-integer shortcut: every
    answer form. ``rel``/``tol`` are the checked tolerances (None: math-verify's rule for plain numbers)."""
    pred = _unwrap(predicted)
    if isinstance(pred, Grade):
        return pred
    if not pred:
        return Grade(Verdict.NO_ANSWER, None, "empty answer")
    if not gold.strip():
        return Grade(Verdict.UNPARSABLE_GOLD, pred, "gold answer is empty")
    if answer_type not in TOLERANT_TYPES:
        return _plan_categorical(pred, gold, answer_type)
    return _plan_quantity(pred, gold, answer_type, rel, tol, use_math_verify)


def plan_math_text(
    text: str, gold: str, answer_type: AnswerType, use_math_verify: bool, *, whole_answer: bool
) -> Grade | MathVerifyJob:
    """A math answer against the gold, without tolerances, read as math-verify reads it
    (`recovery.grading.reading`). ``text`` is a response's answer part, or with ``whole_answer`` an answer on
    its own (what `recovery.grading.grade_answer` is given).

    Text holding LaTeX math goes to math-verify whole, unless its only box holds a plain number that
    math-verify would read as the answer and the gold is a plain number (compared here, by math-verify's
    rule), or math-verify's plain-text reader takes a number first (`plain_answer_first`, read here).
    Text without LaTeX math is read here (math-verify would evaluate it with sympy's ``parse_expr``): the
    number math-verify's plain-text reader takes, else an answer on its own as it stands, and an answer part
    by the answer its "answer is" sentence names or, with no sentence, its last number standing on its own;
    when it uses LaTeX commands, its last line instead (so ``so we get 2\\sqrt{3}`` is not read as ``2``).
    """
    text = text[-MAX_SCAN_CHARS:]
    if has_math_markup(text):
        text = join_thin_space_groups(text)
        if ("\\boxed" in text or "\\fbox" in text) and last_boxed(text) is None:
            return Grade(Verdict.NO_ANSWER, None, "the last \\boxed{} is empty or never closed")
        number, gold_simple = single_box_number(text), simple_number(gold)
        if number is not None and gold_simple is not None:
            return _compare_numbers(parse_numeric(number), parse_numeric(gold_simple), number, None, None)
        plain = plain_answer_first(text, beside_latex=True)
        if plain is not None:  # math-verify's plain-text reading comes first: read that number here
            planned = plan_general(plain, _plain_gold(gold), answer_type, None, None, use_math_verify)
            return _plain_percent(planned, gold)
        shown = extract_answer(text, answer_type)
        if not use_math_verify:
            return plan_general(shown, gold, answer_type, None, None, False) if shown else _no_answer()
        gold_text = gold.strip() if has_math_markup(gold) else clean_answer(gold)  # math-verify reads its math
        if not gold_text:
            return Grade(Verdict.UNPARSABLE_GOLD, shown, "gold answer is empty")
        return MathVerifyJob(text, gold_text, None, None, shown)
    # One number written with a decimal comma ("0,5") is that number, as math-verify reads it.
    text, gold = plain_decimal_comma(text), _plain_gold(gold)
    plain = plain_answer_first(text)
    if plain is not None:  # the number math-verify's plain-text reader takes
        return _plain_percent(plan_general(plain, gold, answer_type, None, None, use_math_verify), gold)
    if whole_answer:  # as it stands, or what its "answer is" sentence names
        candidate = extract_answer(text, AnswerType.EXACT) if text.strip() else None
        return plan_general(text if candidate is None else candidate, gold, answer_type, None, None, use_math_verify)
    # The last bare number is a numeric answer's last resort; an expression, or text using LaTeX
    # commands, falls back to its last line instead (EXACT: box, sentence, last line).
    plain_number_text = answer_type is AnswerType.NUMERIC and not has_latex_command(text)
    if parse_numeric(text) is not None:
        candidate: str | None = text  # the text is one number ("1/2", "12 apples"): that is the answer
    else:
        candidate = extract_answer(text, answer_type if plain_number_text else AnswerType.EXACT)
    if candidate is None:
        return _no_answer()
    planned = plan_general(plain_decimal_comma(candidate), gold, answer_type, None, None, use_math_verify)
    return _plain_percent(planned, gold)


def _plain_percent(planned: Grade | MathVerifyJob, gold: str) -> Grade | MathVerifyJob:
    """A percentage in plain text ("2.5%") is also correct when the number written is the gold as written:
    math-verify's plain-text reader keeps the written number ("2.5") as its extracted text, and ``verify``
    compares extracted texts too. (Inside LaTeX math, ``$2.5\\%$``, its text keeps the sign and only the
    value counts.)"""
    if not isinstance(planned, Grade) or planned.verdict is not Verdict.WRONG or planned.extracted is None:
        return planned
    number = parse_numeric(planned.extracted)
    written = re.match(r"\s*[-+]?[\d.]+", planned.extracted)
    gold_simple = simple_number(gold)
    if number is None or not number.percent or written is None or gold_simple is None:
        return planned
    if written.group(0).strip().lstrip("+") == gold_simple:
        return Grade(Verdict.CORRECT, planned.extracted, f"{planned.extracted} = {gold_simple} (the number written)")
    return planned


def _plain_gold(gold: str) -> str:
    """A gold answer without math delimiters, read as math-verify's plain reader reads it (``1,22`` is 1.22)."""
    return gold if has_math_markup(gold) else plain_decimal_comma(gold)


def _no_answer() -> Grade:
    return Grade(Verdict.NO_ANSWER, None, "no final answer found")


@functools.lru_cache(maxsize=4096)
def gold_number(gold: str) -> tuple[str, ParsedNumber | None]:
    """The cleaned gold answer and its number (None if it is not a plain number). Cached: a run grades
    many continuations per problem against the same gold."""
    gold_clean = clean_answer(gold)
    return gold_clean, parse_numeric(gold_clean)


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


def _plan_categorical(pred: str, gold: str, answer_type: AnswerType) -> Grade:
    normalize, what = normalizer(answer_type) or (normalize_exact, "text")
    gold_norm = normalize(gold)
    if not gold_norm:
        return Grade(Verdict.UNPARSABLE_GOLD, pred, f"gold answer {gold[:80]!r} is not {what}")
    pred_norm = normalize(pred)
    if not pred_norm:
        return Grade(Verdict.WRONG, pred, f"could not read {what} from {pred[:80]!r}")
    if pred_norm == gold_norm:
        return Grade(Verdict.CORRECT, pred_norm, f"{pred_norm!r} matches")
    return Grade(Verdict.WRONG, pred_norm, f"{pred_norm!r} ≠ {gold_norm!r}")


def _plan_quantity(
    pred: str, gold: str, answer_type: AnswerType, rel: float | None, tol: float | None, use_math_verify: bool
) -> Grade | MathVerifyJob:
    """A number or an expression: compared as numbers when both are plain numbers, else by math-verify
    unless the texts settle it (identical expressions, a number against text with no number in it)."""
    gold_clean, gold_num = gold_number(gold)
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
    return MathVerifyJob(f"${pred}$", gold_clean, rel, tol, pred)


def _canon(expr: str) -> str:
    return _CANON_DROP.sub("", expr.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac"))


def _show(number: ParsedNumber) -> str:
    v = number.value
    text = str(v.numerator) if v.denominator == 1 else f"{float(v):.10g}"
    return text + ("%" if number.percent else "")


def _compare_numbers(pred: ParsedNumber, gold: ParsedNumber, extracted: str, rel, tol) -> Grade:
    ok = parsed_numbers_match(pred, gold, rel_tol=rel, abs_tol=tol)
    if rel is None and tol is None:
        how = "6 decimals" if pred.is_float or gold.is_float else "exact"
    else:
        how = f"rel_tol={rel or 0}, abs_tol={tol or 0}"
    sign = "=" if ok else "≠"
    return Grade(Verdict.CORRECT if ok else Verdict.WRONG, extracted, f"{_show(pred)} {sign} {_show(gold)} ({how})")
