"""recovery.grading.extract and .normalize: where the final answer is, and the categorical normalisers."""

from __future__ import annotations

import time

import pytest

from recovery.grading.extract import MAX_BOX_CHARS, answer_part, extract_answer, last_boxed
from recovery.grading.normalize import (
    clean_answer,
    normalize_choice,
    normalize_choices,
    normalize_dyck,
    normalize_exact,
    normalize_label,
)
from recovery.types import AnswerType

A = AnswerType


# -- answer_part -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("<think>r</think>The answer is 4.", "The answer is 4."),
        ("continued reasoning</think>\n\\boxed{4}", "\n\\boxed{4}"),  # continuation: only the closing tag
        ("<thought>r</thought>Yes", "<thought>r</thought>Yes"),  # another family's tags are text
        ("no tags at all, 5", "no tags at all, 5"),
        ("<think>never closed \\boxed{3}", "<think>never closed \\boxed{3}"),
        ("<think>r</think>", ""),
        ("", ""),
    ],
)
def test_answer_part(response: str, expected: str) -> None:
    assert answer_part(response) == expected


def test_answer_part_by_the_models_own_tags() -> None:
    thought = ("<thought>", "</thought>")
    assert answer_part("<thought>r</thought>Yes", thought) == "Yes"  # EXAONE's tags, when they are its model's
    assert answer_part("r </think> still </thought>\\boxed{4}", thought) == "\\boxed{4}"


def test_answer_part_rejects_non_text() -> None:
    with pytest.raises(TypeError):
        answer_part(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        answer_part(b"<think></think>5")  # type: ignore[arg-type]


# -- last_boxed --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{5}", "5"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\boxed{5}}", "5"),  # nested: the innermost, which is also the last
        ("\\fbox{7}", "7"),
        ("\\boxed{1} and \\fbox{2}", "2"),
        ("\\boxed 7$", "7"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not close the box
        ("\\boxed{ 3 }", "3"),
        ("\\boxed{5", None),  # truncated: no answer rather than an earlier one
        ("\\boxed{1} then \\boxed{", None),
        ("\\boxed{}", None),
        ("\\boxed", None),
        ("no box", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_last_boxed_is_bounded_on_huge_unclosed_box() -> None:
    text = "\\boxed{" + "{" * 5_000_000
    start = time.perf_counter()
    assert last_boxed(text) is None
    assert time.perf_counter() - start < 0.5
    assert last_boxed("\\boxed{" + "1" * (MAX_BOX_CHARS + 10) + "}") is None


# -- clean_answer ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", "42"),
        ("  42.  ", "42"),
        ("$42$", "42"),
        ("**42**.", "42"),
        ("`] )`", "] )"),
        ("\\(x+1\\)", "x+1"),
        ("\\[x+1\\]", "x+1"),
        ("\\text{(C)}", "(C)"),
        ("**$\\textbf{Yes}$**.", "Yes"),
        ("5!", "5!"),
        ("10**3", "10**3"),  # "**" inside is an operator, not markdown
        ("\\$5", "\\$5"),
    ],
)
def test_clean_answer(text: str, expected: str) -> None:
    assert clean_answer(text) == expected


# -- normalisers -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(D)", "D"),
        ("D", "D"),
        ("D.", "D"),
        ("(D) Dan finished third", "D"),
        ("Option C", "C"),
        ("the correct option is (B)", "B"),
        ("\\text{(G)}", "G"),
        ("{(A)}", "A"),
        ("AB", None),
        ("Dan", None),
        ("", None),
        ("(K)", None),
    ],
)
def test_normalize_choice(text: str, expected: str | None) -> None:
    assert normalize_choice(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ABD", "ABD"),
        ("DBA", "ABD"),
        ("A, B, D", "ABD"),
        ("(A), (B) and (D)", "ABD"),
        ("(A)(D)", "AD"),
        ("A B", "AB"),
        ("options A and C", "AC"),
        ("\\text{A, C}", "AC"),
        ("AAB", "AB"),
        ("C", "C"),
        ("E or maybe", None),
        ("none", None),
        ("", None),
    ],
)
def test_normalize_choices(text: str, expected: str | None) -> None:
    assert normalize_choices(text) == expected


@pytest.mark.parametrize(
    ("text", "answer_type", "expected"),
    [
        ("Yes", A.YES_NO, "Yes"),
        ("**no**.", A.YES_NO, "No"),
        ("Yes, because no one objected", A.YES_NO, "Yes"),  # a label at the start wins
        ("I would say no", A.YES_NO, "No"),
        ("True", A.TRUE_FALSE, "True"),
        ("false", A.TRUE_FALSE, "False"),
        ("valid", A.VALID_INVALID, "valid"),
        ("Invalid.", A.VALID_INVALID, "invalid"),
        ("the argument is deductively invalid", A.VALID_INVALID, "invalid"),
        ("the argument is valid", A.VALID_INVALID, "valid"),
        ("maybe", A.YES_NO, None),
        ("nothing here", A.TRUE_FALSE, None),
    ],
)
def test_normalize_label(text: str, answer_type: AnswerType, expected: str | None) -> None:
    assert normalize_label(text, answer_type) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("] ]", "] ]"),
        ("]]", "] ]"),
        (" ]  ] ", "] ]"),
        ("] ) }", "] ) }"),
        ("\\} ]", "} ]"),
        ("\\rangle )", "> )"),
        ("&gt; ]", "> ]"),
        ("], ), }", "] ) }"),
        ("`] ) }`.", "] ) }"),
        ("] a", None),
        ("", None),
    ],
)
def test_normalize_dyck(text: str, expected: str | None) -> None:
    assert normalize_dyck(text) == expected


def test_normalize_exact() -> None:
    assert normalize_exact("  Hello   World. ") == "hello world"
    assert normalize_exact("**ABC**") == "abc"


# -- extract_answer ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "answer_type", "expected"),
    [
        # numeric: box first, then answer phrase, then the last number
        ("so \\boxed{12}.", A.NUMERIC, "12"),
        ("The answer is 7. Later: \\boxed{12}", A.NUMERIC, "12"),  # the box wins over a later phrase
        ("\\boxed{x = 4}", A.NUMERIC, "4"),
        ("\\boxed{\\approx 3.14}", A.NUMERIC, "\\approx 3.14"),  # kept as written; parses as 3.14
        ("The answer is 42.", A.NUMERIC, "42"),
        ("The answer is 42 because 6 times 7.", A.NUMERIC, "42"),
        ("The answer is 42 (rounded).", A.NUMERIC, "42"),
        ("Final answer: $1,234$", A.NUMERIC, "1,234"),
        ("**Final Answer**\n\n50\\%", A.NUMERIC, "50\\%"),
        ("So we get 3 then 42 apples.", A.NUMERIC, "42"),
        ("speed 9.8 m/s^2", A.NUMERIC, "9.8"),  # "^2" is not a number of its own
        ("x_1 = 5", A.NUMERIC, "5"),
        ("half: \\frac{1}{2}", A.NUMERIC, "\\frac{1}{2}"),
        ("no digits here", A.NUMERIC, None),
        ("", A.NUMERIC, None),
        ("\\boxed{", A.NUMERIC, None),
        # expressions are returned as written
        ("\\boxed{2\\sqrt{3}}", A.EXPRESSION, "2\\sqrt{3}"),
        ("The answer is $x^2+1$.", A.EXPRESSION, "x^2+1"),
        # multiple choice
        ("\\boxed{D}", A.MULTIPLE_CHOICE, "D"),
        ("\\boxed{\\text{(D)}}", A.MULTIPLE_CHOICE, "D"),
        ("So the answer is (C).", A.MULTIPLE_CHOICE, "C"),
        ("**Answer:** (E) Eve finished third", A.MULTIPLE_CHOICE, "E"),
        ("The correct option is B", A.MULTIPLE_CHOICE, "B"),
        ("C", A.MULTIPLE_CHOICE, "C"),
        ("Comparing (A) with (B), it must be (F) in the end", A.MULTIPLE_CHOICE, "F"),
        ("\\boxed{Dan} so the answer is (D)", A.MULTIPLE_CHOICE, "D"),  # first candidate that reads as a letter
        ("\\boxed{Dan}", A.MULTIPLE_CHOICE, "Dan"),  # none does: the box, to be graded wrong
        ("nothing", A.MULTIPLE_CHOICE, None),
        # multi-select
        ("\\boxed{ABD}", A.MULTI_SELECT, "ABD"),
        ("The answer is (A), (B) and (D).", A.MULTI_SELECT, "ABD"),
        ("BD", A.MULTI_SELECT, "BD"),
        # labels
        ("\\boxed{Yes}", A.YES_NO, "Yes"),
        ("So the answer is: No.", A.YES_NO, "No"),
        ("After all that, yes.", A.YES_NO, "Yes"),
        ("The statement is **False**.", A.TRUE_FALSE, "False"),
        ("Therefore the argument is invalid.", A.VALID_INVALID, "invalid"),
        ("\\boxed{\\text{valid}}", A.VALID_INVALID, "valid"),
        ("no label", A.TRUE_FALSE, None),
        # Dyck
        ("The answer is ] ] >", A.DYCK, "] ] >"),
        ("\\boxed{]]>}", A.DYCK, "] ] >"),
        ("$\\boxed{\\} ]}$", A.DYCK, "} ]"),
        ("$\\boxed{} ]}$", A.DYCK, "} ]"),  # unescaped closing brace inside the box
        ("Final answer: `) } >`", A.DYCK, ") } >"),
        ("We close them:\n] ) }\n", A.DYCK, "] ) }"),
        ("The sequence closes with ]]", A.DYCK, None),
        # exact
        ("The answer is Paris.", A.EXACT, "Paris"),
        ("line one\nParis\n", A.EXACT, "Paris"),
    ],
)
def test_extract_answer(text: str, answer_type: AnswerType, expected: str | None) -> None:
    assert extract_answer(text, answer_type) == expected


def test_extract_answer_accepts_type_names() -> None:
    assert extract_answer("\\boxed{Yes}", "yes_no") == "Yes"


def test_extract_answer_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        extract_answer(None, A.NUMERIC)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        extract_answer(b"\\boxed{1}", A.NUMERIC)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        extract_answer("1", "no_such_type")


@pytest.mark.parametrize("answer_type", list(AnswerType))
def test_extract_answer_is_fast_on_a_10mb_string(answer_type: AnswerType) -> None:
    text = ("lorem 12 ipsum (A) yes ] " * 420_000)[:10_000_000] + " The answer is 5."
    start = time.perf_counter()
    extract_answer(text, answer_type)
    extract_answer("1" * 10_000_000, answer_type)
    extract_answer("\\boxed{" * 1_000_000, answer_type)
    assert time.perf_counter() - start < 2.0


def test_extract_answer_survives_lone_surrogates() -> None:
    assert extract_answer("\udcff\\boxed{3}\udcfe", A.NUMERIC) == "3"
