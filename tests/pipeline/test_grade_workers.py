"""The grades stage's rule-based grading: caches by answer part and extracts each distinct answer once,
with exactly the grades `Grader.grade_many` gives for the same responses."""

from __future__ import annotations

import itertools
import re

import pytest

from recovery.grading import Grader
from recovery.grading.extract import PLAIN_INTEGER
from recovery.grading.integer_grades import integer_gold
from recovery.grading.reading import single_box_number
from recovery.grading.verdict import NEVER_CLOSED, answer_section
from recovery.pipeline.grade_workers import grade_columns
from recovery.pipeline.rule_grading import RuleGrading
from recovery.types import AnswerType, Problem, Verdict

ANSWER_PARTS = [
    "\n\nThe answer is \\boxed{12}.",
    "\\boxed{2\\sqrt{3}}",
    "The answer is (D).",
    "\\boxed{x^2+2x+1}",
    "\\boxed{104}",
    "",
    "\\boxed{\\frac{\\sqrt{3}}{2}}",
    "\\boxed{",
    "\\boxed{\\boxed{4}}",
    "\\boxed{10^{10^{10}}}",
    "\\boxed{1e999999}",
    "\udcff\\boxed{4}\udcfe",
    "So the answer is Yes.",
    "valid",
    "The answer is ] ) }",
    "\\boxed{(A)}",
    "12 apples",
    "The solutions are \\boxed{2} and \\boxed{12}.",  # two boxes: a set (math-verify), not the last box
    "So \\boxed{12}, which is 3 more than 9.",  # a number after the box: math-verify's reading decides
]
GOLDS = {
    AnswerType.NUMERIC: ["12", "104", "0.87", "4"],
    AnswerType.EXPRESSION: ["\\sqrt{12}", "(x+1)^2"],
    AnswerType.MULTIPLE_CHOICE: ["(D)", "(A)"],
    AnswerType.YES_NO: ["Yes"],
    AnswerType.VALID_INVALID: ["valid"],
    AnswerType.DYCK: ["] ) }"],
}


@pytest.fixture(scope="module")
def grader():
    with Grader(workers=2, timeout_s=3.0) as g:
        yield g


def test_rule_grades_equal_grade_many_on_every_answer_type(grader):
    problems = {}
    for answer_type, golds in GOLDS.items():
        for i, gold in enumerate(golds):
            source = "scibench" if gold == "0.87" else "test"
            problems[f"{answer_type.value}-{i}"] = Problem("math", "Input: ( [ {", gold, answer_type, source)
    texts, problem_ids = [], []
    for (pid, _), part in itertools.product(problems.items(), ANSWER_PARTS):
        texts += [f"Step 1.\n</think>{part}", f"Step 2.\n</think>{part}"]  # each answer part twice per problem
        problem_ids += [pid, pid]
    texts.append("Step 1, never closed")
    problem_ids.append(problem_ids[0])

    cache: dict = {}
    grades, reasons = RuleGrading(problems, grader, cache).grades(texts, problem_ids)
    expected = grader.grade_many([(t, problems[p]) for t, p in zip(texts[:-1], problem_ids[:-1])])
    assert grades[:-1] == expected
    assert grades[-1] is NEVER_CLOSED and reasons == {"unclosed_reasoning": 1}
    # One verdict per distinct (answer part, problem), however many texts share it.
    assert len(cache) == len(ANSWER_PARTS) * len(problems)
    assert {g.verdict for g in grades} >= {Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER}


def test_cached_verdicts_are_reused_across_calls(grader):
    problems = {"p": Problem("math", "q", "12", AnswerType.NUMERIC, "test")}
    cache: dict = {}
    first, _ = RuleGrading(problems, grader, cache).grades(["</think>\\boxed{12}"], ["p"])
    again, _ = RuleGrading(problems, grader, cache).grades(["</think>\\boxed{12}", "x</think>\\boxed{12}"], ["p", "p"])
    assert first[0].correct and again == [first[0], first[0]]
    assert again[0] is cache[("\\boxed{12}", "p")]


def test_arrow_grade_columns_equal_the_row_by_row_ones(grader):
    """`rule_grade_arrays` (the workers' path: distinct pairs in Python, rows in Arrow) stores exactly the
    columns `rule_grades` + `grade_columns` store, on every tag shape the full rules handle."""
    problems = {
        "n": Problem("math", "q", "12", AnswerType.NUMERIC, "test"),
        "c": Problem("logic", "q", "(D)", AnswerType.MULTIPLE_CHOICE, "test"),
        "x\x1fy": Problem("math", "q", "4", AnswerType.NUMERIC, "test"),
    }
    shapes = [
        "r</think>{part}",
        "r\n</think>{part}</think>tail",
        "<think>r</think>{part}",
        "r</thought>{part}",
        "<thought>r</thought>{part}",
        "r<think>nested</think>{part}",
        "never closed {part}",
        "</think>",
        "",
    ]
    texts, problem_ids = [None], ["n"]
    for shape, part, pid in itertools.product(shapes, ANSWER_PARTS[:8] + ANSWER_PARTS[-2:], problems):
        texts.append(shape.format(part=part))
        problem_ids.append(pid)
    grades, reasons = RuleGrading(problems, grader, {}).grades(texts, problem_ids)
    expected = grade_columns(["i"] * len(texts), ["c"] * len(texts), grades, [None] * len(texts), "rule")
    cache: dict = {}
    columns, array_reasons = RuleGrading(problems, grader, cache).columns(texts, problem_ids)
    for name in ("verdict", "extracted", "detail", "rule_verdict", "judge_verdict"):
        assert columns[name].to_pylist() == expected[name], name
    assert array_reasons == reasons and reasons["unclosed_reasoning"] > 0
    # Each distinct (answer part, problem) met the grader once (and was cached), except the plain boxed
    # integers (in parts without a think tag) against integer golds, which Arrow settled.
    distinct = {
        (part, pid) for text, pid in zip(texts, problem_ids) if (part := answer_section(text or "")) is not None
    }
    settled = {
        (part, pid)
        for part, pid in distinct
        if (number := single_box_number(part)) is not None
        and re.fullmatch(PLAIN_INTEGER, number)
        and integer_gold(problems[pid]) is not None
        and not any(tag in part for tag in ("<think>", "</think>", "<thought>", "</thought>"))
    }
    assert settled and set(cache) == distinct - settled


def test_arrow_grade_columns_of_empty_and_all_unclosed_chunks(grader):
    problems = {"p": Problem("math", "q", "3", AnswerType.NUMERIC, "test")}
    columns, reasons = RuleGrading(problems, grader, {}).columns(["never closed", None], ["p", "p"])
    assert columns["verdict"].to_pylist() == ["no_answer", "no_answer"] and reasons == {"unclosed_reasoning": 2}
    assert columns["detail"].to_pylist() == [NEVER_CLOSED.detail] * 2 and columns["extracted"].null_count == 2
    columns, reasons = RuleGrading(problems, grader, {}).columns([], [])
    assert all(len(column) == 0 for column in columns.values()) and not reasons


def test_unclosed_grade_credits_an_answer_in_open_reasoning_in_both_paths(grader):
    """``grading.unclosed``: by default a continuation that never closed is ``no_answer`` even with a
    correct box; with ``grade`` it is graded on its whole text — the same in the row and the Arrow path."""
    problems = {"p": Problem("math", "q", "12", AnswerType.NUMERIC, "test")}
    texts = ["so the answer is \\boxed{12}", "<think>so \\boxed{12}", "still \\boxed{13}", "r</think>\\boxed{12}", None]
    ids = ["p"] * len(texts)
    default, default_reasons = RuleGrading(problems, grader, {}).grades(texts, ids)
    assert [g.verdict.value for g in default] == ["no_answer", "no_answer", "no_answer", "correct", "no_answer"]
    assert default_reasons == {"unclosed_reasoning": 4}
    graded, reasons = RuleGrading(problems, grader, {}, unclosed="grade").grades(texts, ids)
    assert [g.verdict.value for g in graded] == ["correct", "correct", "wrong", "correct", "no_answer"]
    assert reasons == {"unclosed_graded": 4}
    for unclosed, grades, expected_reasons in (("no_answer", default, default_reasons), ("grade", graded, reasons)):
        columns, array_reasons = RuleGrading(problems, grader, {}, unclosed=unclosed).columns(texts, ids)
        expected = grade_columns(["i"] * len(texts), ["c"] * len(texts), grades, [None] * len(texts), "rule")
        for name in ("verdict", "extracted", "detail", "rule_verdict"):
            assert columns[name].to_pylist() == expected[name], (unclosed, name)
        assert array_reasons == expected_reasons
    with pytest.raises(ValueError, match="unclosed must be one of"):
        RuleGrading(problems, grader, {}, unclosed="wrong").grades(texts, ids)


def test_arrow_grade_columns_equal_the_row_by_row_ones_when_unclosed_is_graded(grader):
    """The shapes of `test_arrow_grade_columns_equal_the_row_by_row_ones` under ``unclosed="grade"``."""
    problems = {
        "n": Problem("math", "q", "12", AnswerType.NUMERIC, "test"),
        "c": Problem("logic", "q", "(D)", AnswerType.MULTIPLE_CHOICE, "test"),
    }
    shapes = [
        "r</think>{part}",
        "<think>r</think>{part}",
        "<thought>r{part}",
        "r<think>nested{part}",
        "never closed {part}",
        "{part}",
        "",
    ]
    texts, problem_ids = [None], ["n"]
    for shape, part, pid in itertools.product(shapes, ANSWER_PARTS[:8], problems):
        texts.append(shape.format(part=part))
        problem_ids.append(pid)
    grades, reasons = RuleGrading(problems, grader, {}, unclosed="grade").grades(texts, problem_ids)
    expected = grade_columns(["i"] * len(texts), ["c"] * len(texts), grades, [None] * len(texts), "rule")
    columns, array_reasons = RuleGrading(problems, grader, {}, unclosed="grade").columns(texts, problem_ids)
    for name in ("verdict", "extracted", "detail", "rule_verdict", "judge_verdict"):
        assert columns[name].to_pylist() == expected[name], name
    assert array_reasons == reasons and reasons["unclosed_graded"] > 0 and "unclosed_reasoning" not in reasons
    assert {g.verdict for g in grades} >= {Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER}
