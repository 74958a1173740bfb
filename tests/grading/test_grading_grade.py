"""recovery.grading.grade and .symbolic: one item in-process, verdicts with reasons, the math-verify bridge."""

from __future__ import annotations

import threading
import time

import pytest

from recovery.grading import (
    SOURCE_TOLERANCES,
    MathVerifyJob,
    grade_answer,
    grade_response,
    plan_answer,
    plan_response,
    run_job,
    screen_expression,
    tolerances_for,
)
from recovery.grading.symbolic import compare_with_math_verify
from recovery.types import AnswerType, Grade, Problem, Verdict

A, V = AnswerType, Verdict


def problem(answer: str, answer_type: AnswerType | str = A.NUMERIC, source: str = "test", **metadata) -> Problem:
    return Problem("math", "Input: [ {", answer, answer_type, source, metadata=metadata)


# -- grade_answer: the fast paths ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pred", "gold", "verdict", "detail"),
    [
        ("12", "12", V.CORRECT, "12 = 12 (exact)"),
        ("\\boxed{12}", "12", V.CORRECT, "12 = 12 (exact)"),
        ("\\boxed{-3.5}", "-3.5", V.CORRECT, "-3.5 = -3.5 (6 decimals)"),
        ("\\boxed{\\frac{1}{2}}", "0.5", V.CORRECT, "0.5 = 0.5 (6 decimals)"),
        ("1,234", "1234", V.CORRECT, "1234 = 1234 (exact)"),
        ("50\\%", "50", V.CORRECT, "50% = 50 (exact)"),
        # math-verify 0.9: verify(parse("$0.5$"), parse("$50\\%$")) is True (a percentage's value, X/100)
        ("50\\%", "0.5", V.CORRECT, "50% = 0.5 (6 decimals)"),
        ("3.2 \\text{ m/s}", "3.2", V.CORRECT, "3.2 = 3.2 (6 decimals)"),
        ("\u22122", "-2", V.CORRECT, "-2 = -2 (exact)"),
        ("13", "12", V.WRONG, "13 ≠ 12 (exact)"),
        ("0.33", "\\frac{1}{3}", V.WRONG, "0.33 ≠ 0.3333333333 (6 decimals)"),
    ],
)
def test_grade_answer_numeric(pred: str, gold: str, verdict: Verdict, detail: str) -> None:
    grade = grade_answer(pred, gold, A.NUMERIC, use_math_verify=False)
    assert (grade.verdict, grade.detail) == (verdict, detail)


def test_grade_answer_fast_path_never_calls_math_verify(monkeypatch) -> None:
    import recovery.grading.grade as grade_module

    def boom(*args, **kwargs):
        raise AssertionError("math-verify must not be called for plain numbers")

    monkeypatch.setattr(grade_module, "compare_with_math_verify", boom)
    for pred, gold in [
        ("12", "12"),
        ("\\boxed{-3.5}", "-3.5"),
        ("\\boxed{\\frac{1}{2}}", "0.5"),
        ("1,234", "1234"),
        ("50\\%", "50"),
        ("3.2 \\text{ m/s}", "3.2"),
        ("7", "8"),
    ]:
        assert grade_answer(pred, gold, A.NUMERIC).verdict in (V.CORRECT, V.WRONG)
        assert grade_answer(pred, gold, A.EXPRESSION).verdict in (V.CORRECT, V.WRONG)


@pytest.mark.parametrize(
    ("pred", "gold", "rel_tol", "abs_tol", "verdict"),
    [
        ("104", "100", 0.05, None, V.CORRECT),
        ("106", "100", 0.05, None, V.WRONG),
        ("0.12", "0.11", None, 0.01, V.CORRECT),
        ("0.13", "0.11", None, 0.01, V.WRONG),
        ("2.3\\%", "2.3", 0.05, None, V.CORRECT),
        ("89,034", "89,034.79", 0.05, None, V.CORRECT),
    ],
)
def test_grade_answer_with_tolerance(pred, gold, rel_tol, abs_tol, verdict) -> None:
    grade = grade_answer(pred, gold, A.NUMERIC, rel_tol=rel_tol, abs_tol=abs_tol)
    assert grade.verdict is verdict
    assert "rel_tol=" in grade.detail


@pytest.mark.parametrize(
    ("pred", "gold", "answer_type", "verdict", "extracted"),
    [
        ("(D)", "(D)", A.MULTIPLE_CHOICE, V.CORRECT, "D"),
        ("D", "(D)", A.MULTIPLE_CHOICE, V.CORRECT, "D"),
        ("\\boxed{C}", "(D)", A.MULTIPLE_CHOICE, V.WRONG, "C"),
        ("Dan", "(D)", A.MULTIPLE_CHOICE, V.WRONG, "Dan"),
        ("A, B, D", "ABD", A.MULTI_SELECT, V.CORRECT, "ABD"),
        ("AB", "ABD", A.MULTI_SELECT, V.WRONG, "AB"),  # partial credit is not "correct"
        ("yes", "Yes", A.YES_NO, V.CORRECT, "Yes"),
        ("No", "Yes", A.YES_NO, V.WRONG, "No"),
        ("TRUE", "True", A.TRUE_FALSE, V.CORRECT, "True"),
        ("invalid", "valid", A.VALID_INVALID, V.WRONG, "invalid"),
        ("]]", "] ]", A.DYCK, V.CORRECT, "] ]"),
        ("] ) }", "] ) ]", A.DYCK, V.WRONG, "] ) }"),
        ("paris", "Paris", A.EXACT, V.CORRECT, "paris"),
    ],
)
def test_grade_answer_categorical(pred, gold, answer_type, verdict, extracted) -> None:
    grade = grade_answer(pred, gold, answer_type)
    assert (grade.verdict, grade.extracted) == (verdict, extracted)
    assert grade.detail


@pytest.mark.parametrize(
    ("gold", "answer_type"),
    [
        ("", A.NUMERIC),
        ("  ", A.EXPRESSION),
        ("Dan", A.MULTIPLE_CHOICE),
        ("maybe", A.YES_NO),
        ("none", A.MULTI_SELECT),
        ("abc", A.DYCK),
        ("1e999999", A.NUMERIC),
        ("\\frac{1}{0}", A.NUMERIC),
    ],
)
def test_unparsable_gold(gold: str, answer_type: AnswerType) -> None:
    grade = grade_answer("5", gold, answer_type, use_math_verify=False)
    assert grade.verdict is V.UNPARSABLE_GOLD
    assert grade.detail


def test_numeric_gold_that_only_math_verify_reads() -> None:
    assert grade_answer("5", "\\sqrt{2}", A.NUMERIC, use_math_verify=False).verdict is V.UNPARSABLE_GOLD
    assert grade_answer("1.41421356", "\\sqrt{2}", A.NUMERIC).verdict is V.CORRECT


@pytest.mark.parametrize(
    ("pred", "verdict", "reason"),
    [
        (None, V.NO_ANSWER, "no final answer"),
        ("", V.NO_ANSWER, "empty"),
        ("   ", V.NO_ANSWER, "empty"),
        ("\\boxed{", V.NO_ANSWER, "never closed"),
        ("\\boxed{}", V.NO_ANSWER, "empty"),
        ("\\boxed{\\boxed{5}}", V.CORRECT, "equivalent"),  # two boxes: math-verify's reading
        ("x" * 10_000_000, V.WRONG, "too long"),
        ("1e999999", V.WRONG, "beyond ±400"),
        ("10^{10^{10}}", V.WRONG, "nested exponent"),
        ("10**10**10", V.WRONG, "nested exponent"),
        ("\\boxed{9^{9^{9}}}", V.WRONG, "nested exponent"),
        ("100000000!", V.WRONG, "factorial"),
        ("2^{99999999}", V.WRONG, "exponent above"),
        ("no number here", V.WRONG, "not a number"),
        ("\udcff5", V.WRONG, ""),
    ],
)
def test_bad_predictions_get_a_grade_with_a_reason_quickly(pred, verdict, reason) -> None:
    start = time.perf_counter()
    grade = grade_answer(pred, "5", A.NUMERIC, timeout_s=2)
    assert time.perf_counter() - start < 3.0
    assert isinstance(grade, Grade)
    assert grade.verdict is verdict, grade
    assert reason in grade.detail


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"predicted": b"\xff\xfe"}, TypeError),
        ({"predicted": 5}, TypeError),
        ({"gold": None}, TypeError),
        ({"gold": 5}, TypeError),
        ({"answer_type": "no_such_type"}, ValueError),
        ({"rel_tol": -0.1}, ValueError),
        ({"abs_tol": float("nan")}, ValueError),
        ({"rel_tol": "0.1"}, TypeError),
        ({"timeout_s": 0}, ValueError),
    ],
)
def test_wrong_argument_types_raise(kwargs, error) -> None:
    args = {"predicted": "5", "gold": "5", "answer_type": A.NUMERIC} | kwargs
    with pytest.raises(error):
        grade_answer(**args)


def test_bytes_error_says_how_to_fix() -> None:
    with pytest.raises(TypeError, match="decode"):
        grade_answer(b"\xff", "5", A.NUMERIC)


# -- expressions and math-verify ---------------------------------------------------------------------
def test_plan_answer_sends_only_symbolic_answers_to_math_verify() -> None:
    assert isinstance(plan_answer("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", A.EXPRESSION), MathVerifyJob)
    job = plan_answer("2\\sqrt{3}", "\\sqrt{12}", A.EXPRESSION, rel_tol=0.05)
    assert job == MathVerifyJob("$2\\sqrt{3}$", "\\sqrt{12}", 0.05, None, "2\\sqrt{3}")  # as math-verify parses it
    assert plan_answer("x^2 + 1", "x^2+1", A.EXPRESSION).detail == "identical expressions"
    assert plan_answer("x = 5", "5", A.EXPRESSION).verdict is V.CORRECT  # rhs of an equation, as math-verify
    assert plan_answer("0.5", "\\frac{1}{2}", A.EXPRESSION).verdict is V.CORRECT
    assert plan_answer("2\\sqrt{3}", "\\sqrt{12}", A.EXPRESSION, use_math_verify=False).verdict is V.WRONG


@pytest.mark.parametrize(
    ("pred", "gold", "verdict"),
    [
        ("2\\sqrt{3}", "\\sqrt{12}", V.CORRECT),
        ("x^2+2x+1", "(x+1)^2", V.CORRECT),
        ("\\frac{\\pi}{2}", "\\pi/2", V.CORRECT),
        ("2\\sqrt{2}", "\\sqrt{12}", V.WRONG),
        ("\\frac{\\sqrt{3}}{2}", "0.866025", V.CORRECT),
    ],
)
def test_grade_answer_expressions_via_math_verify(pred, gold, verdict) -> None:
    grade = grade_answer(pred, gold, A.EXPRESSION, timeout_s=3)
    assert grade.verdict is verdict
    assert "math-verify" in grade.detail


def test_math_verify_with_tolerance_evaluates_numerically() -> None:
    assert grade_answer("\\frac{\\sqrt{3}}{2}", "0.87", A.NUMERIC, rel_tol=0.05).verdict is V.CORRECT
    assert grade_answer("\\frac{\\sqrt{3}}{2}", "0.87", A.NUMERIC).verdict is V.WRONG


def test_run_job_matches_grade_answer() -> None:
    job = plan_answer("2\\sqrt{3}", "\\sqrt{12}", A.EXPRESSION)
    assert run_job(job, timeout_s=3) == grade_answer("2\\sqrt{3}", "\\sqrt{12}", A.EXPRESSION, timeout_s=3)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("x^2 + 1", None),
        ("2^{10}", None),
        ("\\frac{1}{2}", None),
        ("10^{10^{10}}", "nested exponent"),
        ("10^{2^{x}}", "nested exponent"),
        ("10**10**10", "nested exponent"),
        ("2^3^4", "nested exponent"),
        ("10^{100000}", "exponent above 10000"),
        ("x**99999999999999", "exponent above 10000"),
        ("100000!", "factorial above 10000"),
        ("x" * 1001, "too long (1,001 characters)"),
    ],
)
def test_screen_expression(text: str, reason: str | None) -> None:
    assert screen_expression(text) == reason


def test_compare_with_math_verify_refuses_threads() -> None:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(compare_with_math_verify("x", "x")))
    thread.start()
    thread.join()
    assert out[0][0] is V.ERROR
    assert "main thread" in out[0][1]


def test_compare_with_math_verify_verdicts() -> None:
    assert compare_with_math_verify("2\\sqrt{3}", "\\sqrt{12}")[0] is V.CORRECT
    assert compare_with_math_verify("10^{10^{10}}", "5")[0] is V.WRONG
    assert compare_with_math_verify("5", "10^{10^{10}}")[0] is V.UNPARSABLE_GOLD
    assert compare_with_math_verify("5", "")[0] is V.UNPARSABLE_GOLD


# -- responses and problems --------------------------------------------------------------------------
def test_tolerances_for() -> None:
    assert tolerances_for(problem("1", source="scibench/diff")) == SOURCE_TOLERANCES["scibench"] == (0.05, 0.0)
    assert tolerances_for(problem("1", source="JEEBench")) == SOURCE_TOLERANCES["jeebench"] == (0.0, 0.01)
    assert tolerances_for(problem("1", source="numina")) == (None, None)
    assert tolerances_for(problem("1", source="scibench", rel_tol=0.1)) == (0.1, None)  # metadata wins
    assert tolerances_for(problem("1", abs_tol=0.5)) == (None, 0.5)
    with pytest.raises(ValueError):
        tolerances_for(problem("1", rel_tol=-1))


def test_grade_response_reads_after_the_think_tag() -> None:
    p = problem("4")
    assert grade_response("<think>maybe \\boxed{3}</think>So \\boxed{4}.", p).verdict is V.CORRECT
    assert grade_response("still thinking... the answer is 4</think>\\boxed{3}", p).verdict is V.WRONG
    assert grade_response("no tags: the answer is 4.", p).verdict is V.CORRECT
    assert grade_response("<think>r</think>", p).verdict is V.NO_ANSWER
    assert grade_response(None, p).verdict is V.NO_ANSWER


def test_grade_response_uses_dataset_tolerances() -> None:
    sci = problem("89,034.79", source="scibench/diff")
    assert grade_response("</think>The answer is $\\boxed{89{,}000}$.", sci).verdict is V.CORRECT
    assert grade_response("</think>\\boxed{80000}", sci).verdict is V.WRONG
    jee = problem("2.32", source="jeebench")
    assert grade_response("</think>\\boxed{2.33}", jee).verdict is V.CORRECT
    assert grade_response("</think>\\boxed{2.34}", jee).verdict is V.WRONG
    plain = problem("2.32")
    assert grade_response("</think>\\boxed{2.33}", plain).verdict is V.WRONG
    assert grade_response("</think>\\boxed{2.33}", plain, abs_tol=0.05).verdict is V.CORRECT


def test_grade_response_categorical() -> None:
    assert grade_response("</think>So the answer is (D).", problem("(D)", A.MULTIPLE_CHOICE)).correct
    assert grade_response("</think>\\boxed{ABD}", problem("ABD", A.MULTI_SELECT)).correct
    assert grade_response("</think>**Answer:** No", problem("No", A.YES_NO)).correct
    assert grade_response("</think>The argument is invalid.", problem("invalid", A.VALID_INVALID)).correct
    assert not grade_response("</think>The argument is valid.", problem("invalid", A.VALID_INVALID)).correct


def test_grade_response_dyck_strips_a_repeated_input() -> None:
    p = problem("} ]", A.DYCK)  # the question says "Input: [ {"
    assert grade_response("</think>The answer is } ]", p).correct
    assert grade_response("</think>The full sequence is: [ { } ]\nThe answer is [ { } ]", p).correct
    assert not grade_response("</think>The answer is ] }", p).correct


def test_grade_response_bad_arguments() -> None:
    with pytest.raises(TypeError):
        grade_response(b"\\boxed{4}", problem("4"))
    with pytest.raises(TypeError):
        grade_response("\\boxed{4}", "4")  # type: ignore[arg-type]
    assert plan_response("</think>\\boxed{4}", problem("4")).verdict is V.CORRECT


def test_grade_response_on_a_10mb_response_is_bounded() -> None:
    start = time.perf_counter()
    grade = grade_response("<think>" + "x" * 10_000_000 + "</think>" + "y" * 10_000_000, problem("4"))
    assert grade.verdict is V.NO_ANSWER
    grade = grade_response("1" * 10_000_000, problem("4"), timeout_s=2)
    assert grade.verdict is V.WRONG
    assert time.perf_counter() - start < 5.0


def test_model_text_is_never_evaluated_as_python(monkeypatch) -> None:
    """math-verify's plain-expression extractor runs sympy's parse_expr (eval); it must never be reached."""
    import latex2sympy2_extended.latex2sympy2 as l2s
    import math_verify.parser as mv_parser

    def forbidden(*args, **kwargs):
        raise AssertionError("parse_expr (eval) called on model text")

    monkeypatch.setattr(mv_parser, "parse_expr", forbidden)
    monkeypatch.setattr(l2s, "parse_expr", forbidden)
    for pred in ["__import__('os').system('true')", "x**2 + 1", "2\\sqrt{3}", "(lambda: 1)()", "3 ** 2"]:
        grade = grade_answer(pred, "\\sqrt{12}", A.EXPRESSION, timeout_s=3)
        assert grade.verdict in (V.CORRECT, V.WRONG), grade
