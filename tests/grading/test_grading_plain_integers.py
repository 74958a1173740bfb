"""The plain-integer shortcuts of extraction and comparison give exactly what the general paths give.

`extract_answer` reads ``\\boxed{<integer>}`` directly and `plan_answer` compares two plain integers
directly; both skip the general parsing. These tests hold each shortcut to its general path on generated
answers built to sit on the shortcut's edges (leading zeros, signs, non-ASCII digits, later boxes of other
forms, decimals, percentages, fractions) and on the real R1-distill traces' answer parts.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.grading.compare import plan_math_text
from recovery.grading.extract import answer_part, extract_answer, extract_general, plain_boxed_integer
from recovery.grading.grade import plain_integer_grade, plan_answer
from recovery.types import AnswerType, Grade

integers = st.one_of(
    st.integers(-(10**16), 10**16).map(str),
    st.sampled_from(
        ["0", "-0", "007", "+5", "1,234", "12.0", "3.", "50%", "١٢", "１２", "\\frac{1}{2}", "2^{3}", " 7", "7 "]
    ),
)
surroundings = st.sampled_from(["", "The final answer is \\(", "so $x = ", "\\boxed{1} then ", "\\fbox{2} and "])
endings = st.sampled_from(["", "\\).", ".", "$ and \\boxed{9}", " \\fbox{3}", " \\boxed 4$", "}", "\n\n**Answer:** 5"])
KINDS = st.sampled_from([AnswerType.NUMERIC, AnswerType.EXPRESSION])


@settings(max_examples=600, deadline=None)
@given(before=surroundings, content=integers, after=endings, kind=KINDS)
def test_boxed_integer_shortcut_matches_the_general_extraction(before: str, content: str, after: str, kind) -> None:
    text = f"{before}\\boxed{{{content}}}{after}"
    plain = plain_boxed_integer(text)
    if plain is not None:
        assert plain == extract_general(text, kind)
    assert extract_answer(text, kind) == (plain if plain is not None else extract_general(text, kind))


def test_boxed_integer_shortcut_takes_the_common_forms_and_leaves_the_rest() -> None:
    assert plain_boxed_integer("Thus \\(\\boxed{1234}\\).") == "1234"
    assert plain_boxed_integer("\\boxed{-7}") == "-7"
    others = (
        "\\boxed{007}",
        "\\boxed{1,234}",
        "\\boxed{12}\\boxed 3",
        "\\boxed{1} \\fbox{2}",
        "\\boxed{x = 4}",
        "12",
    )
    for text in others:
        assert plain_boxed_integer(text) is None, text


@settings(max_examples=600, deadline=None)
@given(pred=integers, gold=integers, kind=KINDS)
def test_plain_integer_comparison_matches_the_general_path(pred: str, gold: str, kind) -> None:
    plain = plain_integer_grade(pred, gold)
    general = plan_math_text(pred, gold, kind, True, whole_answer=True)  # an answer on its own
    if plain is not None:
        assert plain == general
    assert plan_answer(pred, gold, kind) == (plain if plain is not None else general)


def test_plain_integer_comparison_is_not_used_with_tolerances() -> None:
    # 104 vs 100 within 5 %: the tolerant comparison decides, not the exact shortcut.
    assert plan_answer("104", "100", "numeric", rel_tol=0.05).correct
    exact = plan_answer("104", "100", "numeric")
    assert plain_integer_grade("104", "100") == Grade(exact.verdict, "104", "104 ≠ 100 (exact)") == exact


def test_shortcuts_agree_on_real_traces(shared_data) -> None:
    """Every real trace's answer part: extraction (shortcut or not) equals the general extraction, and each
    answer graded against the golds gives the general path's grade."""
    answers, golds = [], set()
    lines = (shared_data / "real_traces" / "thought_anchors_math_cots.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        record = json.loads(line)
        answers.append(answer_part(record["solution"]))
        golds.add(str(record["answer"]))
    assert len(answers) >= 100
    shortcut_hits = 0
    for part in answers:
        extracted = extract_answer(part, AnswerType.NUMERIC)
        assert extracted == extract_general(part, AnswerType.NUMERIC)
        shortcut_hits += plain_boxed_integer(part) is not None
        if extracted is None:
            continue
        for gold in sorted(golds)[:40]:
            general = plan_math_text(extracted, gold, AnswerType.NUMERIC, True, whole_answer=True)
            assert plan_answer(extracted, gold, "numeric") == general
    assert shortcut_hits > 0  # the shortcut is exercised by real answers, not only by generated ones
