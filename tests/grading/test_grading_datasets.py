"""Every gold answer in ../shared/data grades correct against itself in several surface forms, and wrong
against a perturbed value: BBH (5 subsets), JEEBench (Integer/Numeric, MCQ, MCQ(multiple)), SciBench.

All of it runs on the fast paths (``use_math_verify=False``): a gold that needed math-verify would show up
as a failure here. The folder is optional; tests skip without it (see ``shared_data`` in conftest).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from recovery.grading import grade_response, parse_numeric
from recovery.types import AnswerType, Problem, Verdict

A = AnswerType
BBH_TYPES = {
    "causal_judgement": A.YES_NO,
    "dyck_languages": A.DYCK,
    "formal_fallacies": A.VALID_INVALID,
    "logical_deduction_seven_objects": A.MULTIPLE_CHOICE,
    "tracking_shuffled_objects_seven_objects": A.MULTIPLE_CHOICE,
}
JEE_TYPES = {"Integer": A.NUMERIC, "Numeric": A.NUMERIC, "MCQ": A.MULTIPLE_CHOICE, "MCQ(multiple)": A.MULTI_SELECT}


def _wrap(answer: str) -> str:
    return "<think>\nSome reasoning.\n\nMore reasoning.\n</think>\n\n" + answer


def _check(problem: Problem, good: list[str], bad: list[str]) -> list[str]:
    """Failures as readable lines (empty when all good forms are correct and all bad ones wrong)."""
    failures = []
    for text in good:
        grade = grade_response(_wrap(text), problem, use_math_verify=False)
        if grade.verdict is not Verdict.CORRECT:
            failures.append(f"gold {problem.answer!r} vs {text!r}: {grade}")
    for text in bad:
        grade = grade_response(_wrap(text), problem, use_math_verify=False)
        if grade.verdict is not Verdict.WRONG:
            failures.append(f"gold {problem.answer!r} vs perturbed {text!r}: {grade}")
    return failures


# -- numbers ------------------------------------------------------------------------------------------
def _plain(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def _number_forms(gold: str, value: Fraction) -> list[str]:
    text = gold.strip()
    forms = [f"\\boxed{{{text}}}", f"The answer is {text}.", f"{text}.", f"The final answer is $\\boxed{{{text}}}$ J."]
    if abs(value) >= 1000:
        forms.append(f"\\boxed{{{float(value):,}}}")  # thousands separators
        forms.append(f"The answer is {float(value):,} \\mathrm{{~m}}.")
    forms.append(f"The answer is ${_plain(value)} \\text{{ m/s}}$.")  # trailing units
    forms.append(f"\\boxed{{{_plain(value)}\\%}}")  # a percentage matches its written value
    if value < 0:
        forms.append(f"\\boxed{{\u2212{_plain(-value)}}}")  # U+2212 minus
    return forms


def _perturbed(value: Fraction) -> list[str]:
    moved = value * Fraction(3, 2) + (1 if value >= 0 else -1)  # outside 5 % and outside ±0.01
    return [f"\\boxed{{{_plain(moved)}}}", f"The answer is {_plain(-moved)}."]


def _load_scibench(root: Path) -> list[Problem]:
    problems = []
    for path in sorted((root / "scibench" / "original").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            problems.append(
                Problem("science", row["problem_text"], row["answer_number"], A.NUMERIC, f"scibench/{path.stem}")
            )
    return problems


def test_scibench_answer_numbers(shared_data: Path) -> None:
    problems = _load_scibench(shared_data)
    assert len(problems) == 692
    failures = []
    for problem in problems:
        value = parse_numeric(problem.answer)
        assert value is not None, f"SciBench gold {problem.answer!r} does not parse"
        failures += _check(problem, _number_forms(problem.answer, value.value), _perturbed(value.value))
    assert not failures, "\n".join(failures[:20])


def test_scibench_odd_gold_values(shared_data: Path) -> None:
    golds = {p.answer for p in _load_scibench(shared_data)}
    assert {"89,034.79", "102,965.21", "\u22122", "\u22121.642876"} <= golds
    for gold, right, wrong in [
        ("89,034.79", "89034.79", "98034.79"),
        ("102,965.21", "$102{,}965.21", "10,296.52"),
        ("\u22122", "-2", "2"),
        ("\u22121.642876", "-1.64", "1.642876"),
    ]:
        problem = Problem("science", "q", gold, A.NUMERIC, "scibench/diff")
        assert grade_response(_wrap(f"\\boxed{{{right}}}"), problem).verdict is Verdict.CORRECT
        assert grade_response(_wrap(f"\\boxed{{{wrong}}}"), problem).verdict is Verdict.WRONG


# -- JEEBench -------------------------------------------------------------------------------------------
def _letters_other_than(gold: str) -> str:
    return next(letter for letter in "ABCD" if letter not in gold)


def test_jeebench_gold_answers(shared_data: Path) -> None:
    rows = json.loads((shared_data / "jeebench" / "dataset.json").read_text(encoding="utf-8"))
    assert len(rows) == 515
    failures = []
    for row in rows:
        answer_type = JEE_TYPES[row["type"]]
        problem = Problem(row["subject"], row["question"], row["gold"], answer_type, "jeebench")
        gold = row["gold"]
        if answer_type is A.NUMERIC:
            value = parse_numeric(gold)
            assert value is not None, f"JEEBench gold {gold!r} does not parse"
            good, bad = _number_forms(gold, value.value), _perturbed(value.value)
        elif answer_type is A.MULTIPLE_CHOICE:
            other = _letters_other_than(gold)
            good = [f"\\boxed{{{gold}}}", f"The answer is ({gold}).", f"**Answer: {gold}**", f"{gold}"]
            bad = [f"\\boxed{{{other}}}", f"The answer is ({other})."]
        else:
            spaced = ", ".join(f"({letter})" for letter in gold)
            extra = gold + _letters_other_than(gold) if len(gold) < 4 else gold[:-1]
            good = [f"\\boxed{{{gold}}}", f"The answer is {spaced}.", f"\\boxed{{{','.join(reversed(gold))}}}"]
            bad = [f"\\boxed{{{extra}}}", f"The answer is {''.join(sorted(extra))}."]
        failures += _check(problem, good, bad)
    assert not failures, "\n".join(failures[:20])


# -- BIG-Bench Hard -------------------------------------------------------------------------------------
_LABEL_FLIP = {"Yes": "No", "No": "Yes", "valid": "invalid", "invalid": "valid"}


def _bbh_forms(target: str, answer_type: AnswerType) -> tuple[list[str], list[str]]:
    if answer_type is A.MULTIPLE_CHOICE:
        letter = target.strip("()")
        other = "A" if letter != "A" else "B"
        good = [
            f"\\boxed{{{target}}}",
            f"\\boxed{{{letter}}}",
            f"So the answer is {target}.",
            f"The answer is {letter}",
            target,
        ]
        return good, [f"\\boxed{{({other})}}", f"So the answer is ({other})."]
    if answer_type is A.DYCK:
        compact = target.replace(" ", "")
        escaped = target.replace("{", "\\{").replace("}", "\\}")
        good = [
            f"The answer is {target}",
            f"\\boxed{{{escaped}}}",
            f"$\\boxed{{{compact}}}$",  # unescaped braces inside the box
            f"Final answer: `{compact}`",
            f"The closing sequence is:\n{target}\n",
        ]
        bad = [
            f"The answer is {target} )",
            f"The answer is {compact[:-1] or ']'}" if len(compact) > 1 else "The answer is ]]",
        ]
        return good, bad
    other = _LABEL_FLIP[target]
    good = [f"\\boxed{{{target}}}", f"So the answer is {target}.", f"**Answer:** {target}", f"{target.lower()}."]
    return good, [f"\\boxed{{{other}}}", f"So the answer is {other}."]


@pytest.mark.parametrize("subset", sorted(BBH_TYPES))
def test_bbh_targets(shared_data: Path, subset: str) -> None:
    data = json.loads((shared_data / "bbh" / f"{subset}.json").read_text(encoding="utf-8"))
    answer_type = BBH_TYPES[subset]
    failures = []
    for example in data["examples"]:
        problem = Problem("logic", example["input"], example["target"], answer_type, f"bbh/{subset}")
        good, bad = _bbh_forms(example["target"], answer_type)
        failures += _check(problem, good, bad)
    assert not failures, "\n".join(failures[:20])
