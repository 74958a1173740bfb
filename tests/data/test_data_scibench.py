"""recovery.data.scibench: 692 textbook problems from ../shared/data/scibench, units and tolerances."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from recovery.data import SCIBENCH_BOOKS, Skips, load_problems, load_scibench
from recovery.data.scibench import PAPER_REL_TOL, normalize_answer_number, official_tolerance, split_unit
from recovery.data.sources import DataError
from recovery.grading import grade_response, tolerances_for
from recovery.types import AnswerType


@pytest.fixture(scope="module")
def scibench_dir(shared_data: Path) -> Path:
    path = shared_data / "scibench"
    if not path.is_dir():
        pytest.skip(f"{path} missing")
    return path


@pytest.fixture(scope="module")
def problems(scibench_dir: Path):  # noqa: ANN201
    return {p.id: p for p in load_scibench(path=scibench_dir)}


def test_counts_ids_and_types(scibench_dir: Path, problems) -> None:  # noqa: ANN001
    assert len(problems) == 692
    values = list(problems.values())
    assert all(p.answer_type is AnswerType.NUMERIC and p.domain == "science" for p in values)
    assert Counter(p.metadata["book"] for p in values) == {
        "atkins": 121,
        "stat": 92,
        "thermo": 83,
        "fund": 81,
        "class": 63,
        "matter": 57,
        "diff": 55,
        "calculus": 52,
        "chemmc": 47,
        "quan": 41,
    }
    assert Counter(p.metadata["subject"] for p in values) == {"chemistry": 266, "physics": 227, "math": 199}
    # problemid clashes get #2 in load order; the exact duplicate row of thermo_sol.json is kept twice
    repeats = sorted(i for i in problems if "#" in i)
    assert len(repeats) == 11 and "scibench/thermo/18.4#2" in repeats
    assert problems["scibench/thermo/18.4"].metadata["index"] == 4
    assert problems["scibench/thermo/18.4#2"].metadata["index"] == 5
    assert len(load_scibench(path=scibench_dir, include_sol=False)) == 580
    assert len(load_scibench(path=scibench_dir / "original" / "quan.json")) == 33
    assert len(load_scibench(path=scibench_dir, books=["quan"])) == 41


def test_answer_number_oddities(problems) -> None:  # noqa: ANN001
    # diff.json: thousands separators and U+2212 minus signs (shared/data/scibench/README.md)
    assert problems["scibench/diff/page_61-10"].answer == "89034.79"
    assert problems["scibench/diff/page_61-10"].metadata["answer_number"] == "89,034.79"
    assert problems["scibench/diff/page61-10"].answer == "102965.21"
    negatives = sorted(p.answer for p in problems.values() if p.metadata["answer_number"].startswith("\u2212"))
    assert negatives == ["-1.642876", "-2"]
    assert normalize_answer_number(" 1,234,567.5 ") == "1234567.5" and normalize_answer_number("1,23") is None


def test_units_in_the_question_and_powers_of_ten(problems) -> None:  # noqa: ANN001
    atkins = problems["scibench/atkins/12.1"]  # unit " $10^{-47} \mathrm{~kg} \mathrm{~m}^2$", answer 1.91
    assert atkins.answer == "1.91e-47" and atkins.metadata["power_of_ten"] == -47
    assert atkins.question.endswith(" The unit of the answer is $\\mathrm{~kg} \\mathrm{~m}^2$.")
    km = problems["scibench/calculus/10.6.29"]  # " $\mathrm{10^7} \mathrm{~km}$", answer 7
    assert km.answer == "70000000" and km.metadata["unit"] == "$\\mathrm{~km}$"
    assert problems["scibench/fund/Question_21.69"].answer == "510"  # 5.1 × 10^2 N
    bare = problems["scibench/quan/1.6.1_a"]  # unit " $10^{-6}$": nothing left to say
    assert bare.answer == "4.979e-6" and "The unit of the answer" not in bare.question
    blank = problems["scibench/diff/page131-9"]  # unit " $"
    assert blank.question.endswith("to pay off the loan in 3 years?")
    assert sum(1 for p in problems.values() if p.metadata["power_of_ten"]) == 109


def test_split_unit_cases() -> None:
    assert split_unit(" $10 ^ {-6}m/s^2$") == ("$m/s^2$", -6)
    assert split_unit("$10^{-5}~\\mathrm{m^2~s^{-1}}$") == ("$\\mathrm{m^2~s^{-1}}$", -5)
    assert split_unit(" $\r\n10^{15} \\text { photon } \\cdot \\mathrm{s}^{-1}\r\n$") == (
        "$\\text { photon } \\cdot \\mathrm{s}^{-1}$",
        15,
    )
    assert split_unit(" $\\mathrm{~kJ} \\mathrm{~mol}^{-1}$") == ("$\\mathrm{~kJ} \\mathrm{~mol}^{-1}$", 0)
    assert split_unit("$\\mathrm{m}^{10}$") == ("$\\mathrm{m}^{10}$", 0)  # a power of ten only at the start


def test_tolerance_modes(scibench_dir: Path, problems) -> None:  # noqa: ANN001
    paper = problems["scibench/atkins/12.1"]
    assert (paper.metadata["rel_tol"], paper.metadata["abs_tol"]) == (PAPER_REL_TOL, 0.0)
    assert tolerances_for(paper) == (0.05, 0.0)  # grading reads the metadata
    official = {p.id: p for p in load_scibench(path=scibench_dir, tolerance="official")}
    assert tolerances_for(official["scibench/fund/Question_21.69"]) == (0.0, 0.1)  # gold 510 ≥ 1
    assert tolerances_for(official["scibench/atkins/12.1"]) == (0.1, 0.0)  # gold 1.91e-47 < 1
    assert official_tolerance("-2") == (0.1, 0.0)  # eval_zero.py::equiv tests `ans >= 1`
    bare = load_scibench(path=scibench_dir, tolerance=None)[0]
    assert "rel_tol" not in bare.metadata and tolerances_for(bare) == (0.05, 0.0)  # SOURCE_TOLERANCES
    with pytest.raises(ValueError, match="tolerance"):
        load_scibench(path=scibench_dir, tolerance="loose")  # type: ignore[arg-type]
    # 5 % relative: 1.99e-47 is within 5 % of 1.91e-47, 2.02e-47 is not
    assert grade_response("\\boxed{1.99 \\times 10^{-47}}", paper).correct
    assert not grade_response("\\boxed{2.02e-47}", paper).correct


def test_hub_path_with_injected_dataset(scibench_dir: Path) -> None:
    from datasets import Dataset

    rows = []
    for file in sorted((scibench_dir / "original").glob("*.json")):
        rows += json.loads(file.read_text(encoding="utf-8"))
    seen = []

    def fake(repo, name, split, revision):  # noqa: ANN001, ANN202
        seen.append((repo, name, split))
        return Dataset.from_list(
            [
                {
                    k: r.get(k, "")
                    for k in (
                        "problem_text",
                        "answer_number",
                        "unit",
                        "source",
                        "problemid",
                        "answer_latex",
                        "comment",
                        "solution",
                    )
                }
                for r in rows
            ]
        )

    hub = load_problems("scibench", loader=fake)  # the flat option of a run config
    assert seen == [("xw27/scibench", None, "train")]
    local = load_scibench(path=scibench_dir)
    assert [(p.id, p.question, p.answer) for p in hub] == [(p.id, p.question, p.answer) for p in local]
    assert "file" not in hub[0].metadata and local[0].metadata["file"] == "atkins"
    assert [p.id for p in load_scibench(dataset=rows)] == [p.id for p in local]


def test_registry_and_bad_rows(shared_data: Path, tmp_path: Path) -> None:
    assert len(load_problems("scibench", path=shared_data)) == 692
    assert len(load_problems("scibench/diff", path=shared_data)) == 55
    with pytest.raises(DataError, match="unknown SciBench book"):
        load_problems("scibench/biology", path=shared_data)
    rows = [
        {"problem_text": "Q1", "answer_number": "abc", "unit": "", "source": "atkins", "problemid": "1"},
        {"problem_text": "Q2", "unit": "", "source": "atkins", "problemid": "2"},
        {"problem_text": "Q3", "answer_number": "3", "unit": " $\\mathrm{K}$", "source": "atkins", "problemid": "3"},
    ]
    (tmp_path / "atkins.json").write_text(json.dumps(rows), encoding="utf-8")
    skips = Skips()
    loaded = load_scibench(path=tmp_path, skips=skips)
    assert [p.id for p in loaded] == ["scibench/atkins/3"]
    assert loaded[0].question == "Q3 The unit of the answer is $\\mathrm{K}$."
    assert skips.as_dict() == {"answer_not_numeric": 1, "missing_field:answer_number": 1}
    with pytest.raises(DataError, match="no SciBench"):
        load_scibench(path=tmp_path / "empty_dir_that_does_not_exist")


def test_books_table_is_complete(problems) -> None:  # noqa: ANN001
    assert {p.metadata["book"] for p in problems.values()} == set(SCIBENCH_BOOKS)
