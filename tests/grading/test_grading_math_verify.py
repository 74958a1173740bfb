"""The grader against math-verify called as its users call it: ``verify(parse(gold), parse(response))`` on the
raw strings (the gold between ``$`` signs when it has none, as math-verify's README writes golds), never after
this project's normalisation.

The property test draws answers in the forms models write (boxes, "final answer" sentences, inline math,
plain sentences), numbers as integers, decimals, fractions, percentages, thousands and decimal commas and
LaTeX separators, and holds on every draw: where the project departs from math-verify on purpose
(`docs/grading.md`), the generator does not draw that form, and the departure has its own test below.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.grading import Grader, grade_answer, grade_response
from recovery.types import AnswerType, Grade, Problem, Verdict

pytest.importorskip("math_verify")


def math_verify_says(gold: str, response: str) -> bool:
    """math-verify 0.9's verdict, called as its README calls it (default extraction: LaTeX and plain
    expressions; this test's own strings only are parsed with the plain-expression reader)."""
    from math_verify import parse, verify

    gold_text = gold if "$" in gold or "\\boxed" in gold else f"${gold}$"
    return bool(verify(parse(gold_text), parse(response)))


def ours(gold: str, response: str) -> Grade:
    problem = Problem("math", "q", gold, AnswerType.NUMERIC, "test")
    return grade_response(response, problem)


# -- the property ---------------------------------------------------------------------------------------
_VALUES = st.one_of(
    st.integers(min_value=-3000, max_value=300_000),
    st.decimals(min_value=-500, max_value=5000, places=2, allow_nan=False, allow_infinity=False),
    st.sampled_from(["0.5", "0.25", "0.025", "2.5", "1.0", "50.0", "0.333333", "0.3333", "12.50", "100.0"]),
)


@st.composite
def written_numbers(draw, *, latex: bool) -> str:
    """One number as a model writes it: inside LaTeX math (``latex``) or in plain text."""
    value = draw(_VALUES)
    text = str(value)
    integer = "." not in text
    forms = ["plain"]
    if integer and abs(int(text)) >= 1000:
        forms.append("thousands")
        if latex:
            forms.append("latex_braced_comma")  # a thin space ("1\\,250") is a departure, tested below
    if integer and 0 < int(text) <= 200:
        forms += ["percent", "fraction"] if latex else ["fraction"]
    if not integer and "." in text and not text.startswith("-"):
        forms.append("percent" if latex else "decimal_comma")  # a plain "0.5%" is a departure, tested below
    form = draw(st.sampled_from(forms))
    if form == "thousands":
        return f"{int(text):,}"
    if form == "latex_braced_comma":
        return f"{int(text):,}".replace(",", "{,}")
    if form == "percent":
        return f"{text}\\%" if latex else f"{text}%"
    if form == "fraction":
        denominator = draw(st.sampled_from([2, 3, 4, 8]))
        return f"\\frac{{{text}}}{{{denominator}}}" if latex else f"{text}/{denominator}"
    if form == "decimal_comma":
        return text.replace(".", ",")
    return text


@st.composite
def responses(draw) -> tuple[str, str]:
    """(gold, response): a gold answer and a response that writes its own answer in a common form."""
    gold = draw(written_numbers(latex=True))
    same = draw(st.booleans())
    shape = draw(
        st.sampled_from(
            [
                "boxed",
                "inline",
                "final_hope",
                "final_hope_plain",
                "final_display",
                "sentence",
                "two_boxes",
                "earlier_number",
                "bare",
                "units",
                "units_plain",
            ]
        )
    )
    latex = shape not in ("sentence", "bare", "final_hope_plain", "units_plain")
    answer = draw(written_numbers(latex=latex))
    if same and latex:
        answer = gold
    other = draw(written_numbers(latex=True))
    text = {
        "boxed": f"So the total is \\boxed{{{answer}}}.",
        "inline": f"Therefore the result is ${answer}$.",
        "final_hope": f"The final answer is ${answer}$. I hope it is correct.",
        "final_display": f"**Final Answer**\n\\[\n\\boxed{{{answer}}}\n\\]",
        "sentence": f"The answer is {answer}.",
        "two_boxes": f"The solutions are \\boxed{{{answer}}} and \\boxed{{{other}}}.",
        "earlier_number": f"First $x = {other}$, and after checking, the answer is $\\boxed{{{answer}}}$.",
        "bare": answer,
        "final_hope_plain": f"Final Answer: The final answer is {answer}. I hope it is correct.",
        "units": f"The length is $\\boxed{{{answer} \\text{{ cm}}}}$.",
        "units_plain": f"The answer is {answer} cm.",
    }[shape]
    return gold, text


@settings(max_examples=300, deadline=None)
@given(responses())
def test_verdicts_equal_math_verify_on_the_raw_strings(case: tuple[str, str]) -> None:
    gold, response = case
    expected = math_verify_says(gold, response)
    grade = ours(gold, response)
    assert grade.verdict in (Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER), grade
    assert grade.correct is expected, (gold, response, grade)


# -- the families math-verify's own tests exercise (new examples) ---------------------------------------
@pytest.mark.parametrize(
    ("gold", "response", "correct"),
    [
        # several boxed answers are one answer, a set
        ("2, -3", "The solutions are \\boxed{2} and \\boxed{-3}.", True),
        ("-3", "The solutions are \\boxed{2} and \\boxed{-3}.", False),
        ("-3, 2", "Roots: $\\boxed{-3}$ and $\\boxed{2}$", True),
        # the "final answer ... I hope it is correct" format, a symbolic answer
        ("\\frac{10\\sqrt{2}}{27}", "The final answer is $\\frac{10\\sqrt{2}}{27}$. I hope it is correct.", True),
        ("\\frac{3\\pi}{4}", "Final Answer: The final answer is $\\frac{3\\pi}{4}$. I hope it is correct.", True),
        # a later "final answer" sentence is the answer, not an earlier box
        ("5", "We first get \\boxed{7}. Correcting the sign, the final answer is $5$", True),
        # escaped dollar amounts and LaTeX thousands separators
        ("1250.50", "The cost is \\boxed{\\$1,\\!250.50}.", True),
        ("1250.50", "The cost is $\\$1{,}250.50$.", True),
        # an approximation after the exact value
        ("\\frac{1}{3}", "So $x = 1/3 \\approx 0.33$.", True),
        # relations and intervals
        ("3", "Hence $x = 3$.", True),
        ("(2, 5]", "The set is $x \\in (2, 5]$.", True),
        ("(2, 5]", "The set is $x \\in [2, 5]$.", False),
        # a comma after a leading zero is a decimal comma in plain text
        ("0.75", "The answer is 0,75.", True),
        ("0.75", "0,75", True),
        # percentages, as math-verify compares them
        ("0.5", "$50\\%$", True),
        ("50", "$50\\%$", True),
        ("50.0", "$50\\%$", False),
        ("2.5", "$2.5\\%$", False),
        ("0.025", "$2.5\\%$", True),
    ],
)
def test_math_verify_families(gold: str, response: str, correct: bool) -> None:
    assert math_verify_says(gold, response) is correct  # the reference itself, on these strings
    assert ours(gold, response).correct is correct


# -- no rule may turn a wrong answer into a correct one ------------------------------------------------
@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("1, 2, 3", "The sequence is \\boxed{1, 2, 3, ...}"),  # an ellipsis is not the list
        ("12", "\\boxed{12 is not the answer}"),  # trailing words are not a unit
        ("12", "The answer is $12 \\cdot x$."),
        ("4", "The matrix is $\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$."),  # not its last entry
        ("4", "We get $\\begin{bmatrix} 1 \\\\ 4 \\end{bmatrix}$"),
        ("0.33", "So $x = 1/3 \\approx 0.33$."),  # the exact value, not the approximation
        ("3", "Therefore $x < 3$."),  # a relation is not its bound
        ("3", "The answer is $x \\geq 3$."),
        ("5", "The solutions are \\boxed{5} and \\boxed{-5}."),  # one of several boxed answers
        ("4", "We have x^2+4x+4 = 0"),  # no bare answer in an expression
        ("3", "so we get 2\\sqrt{3}"),  # a number inside LaTeX is not the answer
        ("2", "so we get 2\\sqrt{3}"),
        ("1", "The answer is 1, 2, 3, ..."),  # the first item of a list
    ],
)
def test_a_wrong_answer_is_never_graded_correct(gold: str, response: str) -> None:
    assert ours(gold, response).correct is False
    assert grade_answer(response, gold, AnswerType.EXPRESSION).correct is False


# -- deliberate departures (docs/grading.md), each with its reason ----------------------------------------
@pytest.mark.parametrize(
    ("gold", "response", "math_verify", "ours_says"),
    [
        # A Unicode minus sign (U+2212), as SciBench and many models write it: math-verify finds no number.
        ("-5", "The answer is \u22125.", False, True),
        # A LaTeX thin space as a thousands separator: math-verify reads "1" in plain text, 251 in math.
        ("1250", "The answer is 1\\,250.", False, True),
        ("1250", "The total is $1\\,250$.", False, True),
        # A percentage in plain text: math-verify also compares its extracted texts, and its text of a gold
        # depends on its LaTeX normalisation ("0.5" becomes "\\frac{1}{2}", "0.25" stays), so "0.25%" matches
        # 0.25 and "0.5%" does not; here both match the number written.
        ("0.5", "The answer is 0.5%.", False, True),
        ("0.25", "The answer is 0.25%.", True, True),
        # A box that never closes (a truncated response): math-verify may read an earlier answer; no answer.
        ("7", "So $x = 7$, and the answer is \\boxed{7", True, False),
    ],
)
def test_deliberate_departures(gold: str, response: str, math_verify: bool, ours_says: bool) -> None:
    assert math_verify_says(gold, response) is math_verify
    assert ours(gold, response).correct is ours_says


def test_the_grader_workers_give_the_same_verdicts() -> None:
    """The pipeline grades through worker processes: the same verdicts as in this process."""
    cases = [
        ("2, -3", "The solutions are \\boxed{2} and \\boxed{-3}."),
        ("1, 2, 3", "The sequence is \\boxed{1, 2, 3, ...}"),
        ("0.5", "$50\\%$"),
        ("12", "So \\boxed{12}."),
    ]
    problems = [Problem("math", "q", gold, AnswerType.NUMERIC, "test") for gold, _ in cases]
    with Grader(workers=1, timeout_s=5) as grader:
        pooled = grader.grade_many([(response, p) for (_, response), p in zip(cases, problems)])
    assert [g.correct for g in pooled] == [ours(gold, response).correct for gold, response in cases]
    assert [g.correct for g in pooled] == [True, False, True, True]
