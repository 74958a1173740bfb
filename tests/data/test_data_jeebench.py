"""recovery.data.jeebench: 515 questions from ../shared/data/jeebench, answer types and the 0.01 tolerance."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from recovery.data import NUMERIC_TYPES, Skips, load_jeebench, load_problems
from recovery.data.jeebench import JEEBENCH_INSTRUCTIONS
from recovery.data.sources import DataError
from recovery.grading import grade_response, tolerances_for
from recovery.types import AnswerType


@pytest.fixture(scope="module")
def jee_dir(shared_data: Path) -> Path:
    path = shared_data / "jeebench"
    if not (path / "dataset.json").is_file():
        pytest.skip(f"{path}/dataset.json missing")
    return path


@pytest.fixture(scope="module")
def problems(jee_dir: Path):  # noqa: ANN201
    return {p.id: p for p in load_jeebench(path=jee_dir)}


def test_counts_and_answer_types(problems) -> None:  # noqa: ANN001
    assert len(problems) == 515
    values = list(problems.values())
    types = Counter(p.metadata["type"] for p in values)
    assert types == {"MCQ(multiple)": 186, "Numeric": 137, "MCQ": 110, "Integer": 82}
    kinds = Counter((p.metadata["type"], p.answer_type) for p in values)
    assert kinds == {
        ("MCQ", AnswerType.MULTIPLE_CHOICE): 110,
        ("MCQ(multiple)", AnswerType.MULTI_SELECT): 186,
        ("Integer", AnswerType.NUMERIC): 82,
        ("Numeric", AnswerType.NUMERIC): 137,
    }
    assert Counter(p.metadata["subject"] for p in values) == {"math": 236, "chemistry": 156, "physics": 123}
    assert all(p.domain == "science" and p.source == "jeebench" for p in values)


def test_hand_checked_items(problems) -> None:  # noqa: ANN001
    first = problems["jeebench/2016/p1/1"]  # Planck's constant experiment, MCQ, gold B
    assert first.answer == "B" and first.answer_type is AnswerType.MULTIPLE_CHOICE
    assert first.question.startswith(JEEBENCH_INSTRUCTIONS["MCQ"] + "\n\nIn a historical experiment")
    multi = problems["jeebench/2016/p1/6"]
    assert multi.answer == "ABD" and multi.answer_type is AnswerType.MULTI_SELECT
    assert multi.question.startswith("In this problem, multiple options can be correct.")
    numeric = problems["jeebench/2018/p2/30"]
    assert numeric.answer == "-14.6" and numeric.metadata["subject"] == "chemistry"
    assert (numeric.metadata["rel_tol"], numeric.metadata["abs_tol"]) == (0.0, 0.01)
    assert tolerances_for(numeric) == (0.0, 0.01)
    assert "rel_tol" not in first.metadata  # categorical answers have no tolerance
    # compute_metrics.py: abs(gold - response) <= 0.01
    assert grade_response("\\boxed{-14.61}", numeric).correct
    assert not grade_response("\\boxed{-14.62}", numeric).correct


def test_question_compaction_and_raw_mode(jee_dir: Path, problems) -> None:  # noqa: ANN001
    raw = {f"{r['description']}|{r['index']}": r for r in json.loads((jee_dir / "dataset.json").read_text("utf-8"))}
    row = raw["JEE Adv 2016 Paper 1|1"]
    assert problems["jeebench/2016/p1/1"].question.endswith(row["question"].replace("\n\n", "\n").strip())
    plain = {p.id: p for p in load_jeebench(path=jee_dir, instructions=False)}
    assert plain["jeebench/2016/p1/1"].question == row["question"]


def test_subsets(jee_dir: Path, shared_data: Path) -> None:
    numeric = load_jeebench(path=jee_dir, types=NUMERIC_TYPES)
    assert len(numeric) == 219 and all(p.answer_type is AnswerType.NUMERIC for p in numeric)
    assert Counter(p.metadata["subject"] for p in numeric) == {"math": 98, "chemistry": 66, "physics": 55}
    assert len(load_jeebench(path=jee_dir, subjects=["phy"])) == 123
    assert len(load_jeebench(path=jee_dir, subjects=["physics"])) == 123
    assert len(load_problems("jeebench/numeric", path=shared_data)) == 219
    assert len(load_problems("jeebench", path=jee_dir / "dataset.json")) == 515
    assert len(load_problems("science", path=shared_data)) == 692 + 515
    with pytest.raises(DataError, match="unknown JEEBench type"):
        load_jeebench(path=jee_dir, types=["Essay"])
    with pytest.raises(DataError, match="unknown JEEBench subset"):
        load_problems("jeebench/hard", path=shared_data)


def test_hub_path_with_injected_dataset(jee_dir: Path) -> None:
    from datasets import Dataset

    rows = json.loads((jee_dir / "dataset.json").read_text(encoding="utf-8"))
    calls = []

    def fake(repo, name, split, revision):  # noqa: ANN001, ANN202
        calls.append((repo, name, split))
        return Dataset.from_list(rows)

    hub = load_problems("jeebench/numeric", loader=fake)  # the flat option of a run config
    assert calls == [("daman1209arora/jeebench", None, "test")]
    assert [p.id for p in hub] == [p.id for p in load_jeebench(path=jee_dir, types=NUMERIC_TYPES)]
    assert [p.id for p in load_jeebench(dataset=rows, types=NUMERIC_TYPES)] == [p.id for p in hub]


def test_bad_rows_counted(tmp_path: Path) -> None:
    base = {"description": "JEE Adv 2020 Paper 2", "subject": "math", "question": "Q"}
    rows = [
        {**base, "index": 3, "type": "Integer", "gold": 4},
        {**base, "index": 4, "type": "Essay", "gold": "x"},
        {**base, "index": 5, "type": "MCQ", "gold": "Z"},
        {**base, "index": 6, "type": "MCQ"},
    ]
    (tmp_path / "dataset.json").write_text(json.dumps(rows), encoding="utf-8")
    skips = Skips()
    loaded = load_jeebench(path=tmp_path, skips=skips)
    assert [(p.id, p.answer) for p in loaded] == [("jeebench/2020/p2/3", "4")]  # an int gold becomes text
    assert skips.as_dict() == {"gold_not_multiple_choice": 1, "missing_field:gold": 1, "unknown_type": 1}
