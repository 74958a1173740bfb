"""The Arrow shortcut for plain boxed integers gives the general grader's exact grade wherever it applies,
and applies to the common shapes (so the grading workers rarely need the general path)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.grading import Grader
from recovery.grading.integer_grades import integer_gold, integer_golds, plain_integer_grades
from recovery.pipeline.rule_grading import RuleGrading
from recovery.types import AnswerType, Problem

PROBLEMS = {
    "int": Problem("math", "q", "36", AnswerType.NUMERIC, "test"),
    "neg": Problem("math", "q", "-4", AnswerType.EXPRESSION, "test"),
    "big": Problem("math", "q", "123456789012345678901234", AnswerType.NUMERIC, "test"),
    "float": Problem("math", "q", "36.0", AnswerType.NUMERIC, "test"),
    "percent": Problem("math", "q", "36%", AnswerType.NUMERIC, "test"),
    "frac": Problem("math", "q", "\\frac{1}{2}", AnswerType.NUMERIC, "test"),
    "tolerant": Problem("science", "q", "36", AnswerType.NUMERIC, "scibench"),
    "choice": Problem("logic", "q", "(A)", AnswerType.MULTIPLE_CHOICE, "test"),
    "comma": Problem("math", "q", "1,234", AnswerType.NUMERIC, "test"),
}

numbers = st.one_of(
    st.integers(-(10**16), 10**16).map(str), st.sampled_from(["36", "-4", "0", "-0", "007", "1234", "36.0", "x"])
)
befores = st.sampled_from(
    ["", "\n\nThe final answer is \\(", "So \\boxed{5} and then ", "<think>", "\\fbox{1} ", "</thought>"]
)
afters = st.sampled_from(["", "\\).", " \\boxed{x}", " \\fbox{2}", " \\boxed 3", "</think>", ".\n\n**36**"])


@pytest.fixture(scope="module")
def grader():
    with Grader(workers=1, timeout_s=3.0) as g:
        yield g


def test_integer_golds_only_where_the_exact_comparison_applies():
    assert [integer_gold(p) for p in PROBLEMS.values()] == [36, -4, None, None, None, None, None, None, 1234]
    assert integer_golds(PROBLEMS.values()).type == pa.int64()


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(befores, numbers, afters, st.sampled_from(sorted(PROBLEMS))), min_size=1, max_size=9))
def test_shortcut_grades_equal_the_general_grades(grader, parts):
    answers = [f"{before}\\boxed{{{number}}}{after}" for before, number, after, _ in parts]
    pids = [pid for *_, pid in parts]
    golds = integer_golds(PROBLEMS[p] for p in pids)
    settled, verdict, extracted, detail = plain_integer_grades(pa.array(answers), golds)
    general = RuleGrading(PROBLEMS, grader, {}).grade_keys(list(zip(answers, pids)))
    for i, grade in enumerate(general):
        if settled[i].as_py():
            shortcut = (verdict[i].as_py(), extracted[i].as_py(), detail[i].as_py())
            assert shortcut == (grade.verdict.value, grade.extracted, grade.detail)


def test_shortcut_takes_the_common_final_answers():
    answers = [
        "\n\nThe final answer is \\(\\boxed{36}\\).",
        "\\boxed{-4}",
        "\\boxed{7}",
        "\\boxed{36} then \\boxed{x}",
        "\\boxed{36}",
    ]
    pids = ["int", "neg", "int", "int", "tolerant"]
    golds = integer_golds(PROBLEMS[p] for p in pids)
    settled, verdict, _, detail = plain_integer_grades(pa.array(answers), golds)
    assert settled.to_pylist() == [True, True, True, False, False]
    assert verdict.to_pylist()[:3] == ["correct", "correct", "wrong"]
    assert detail.to_pylist()[2] == "7 ≠ 36 (exact)"
