"""recovery.data.general_thoughts on a 6-row fixture in the GeneralReasoning/GeneralThought schema (no Hub here).

The fixture (fixtures/general_thoughts_sample.jsonl) answers questions of the NuminaMath fixture
(numina_olympiads_sample.jsonl). Row by row: Problem 0 — DeepSeek-R1, verified (1.0) · Problem 1 — R1 wrong
(0.0), then R1 verified on a second try · Problem 2 — ``DeepSeek/DeepSeek-R1`` verified, its text with extra
whitespace and a line break · Problem 3 — only DeepSeek-R1-Zero (another model) · Problem 5 — R1 not
verified (null score). So R1 solved Problems 0, 1 and 2; not 5; and has no trace of 3 or any other.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.data import load_numina_olympiads
from recovery.data.general_thoughts import (
    GENERAL_THOUGHTS_HUB,
    NO_TRACE,
    NOT_SOLVED,
    keep_reference_solved,
    load_reference_solutions,
    normalize_question,
)

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE = FIXTURES / "general_thoughts_sample.jsonl"
NUMINA = FIXTURES / "numina_olympiads_sample.jsonl"


def question(n: int) -> str:
    return f"Problem {n}: find the value asked for in item {n}."


def test_which_questions_r1_solved() -> None:
    solutions = load_reference_solutions(path=SOURCE)
    assert [solutions.status(question(n)) for n in (0, 1, 2, 3, 5, 7)] == [
        None,
        None,  # solved on its second try
        None,  # owner-prefixed model name, other whitespace
        NO_TRACE,  # only another model answered it
        NOT_SOLVED,  # answered, never verified
        NO_TRACE,
    ]


def test_another_model_is_read_by_name() -> None:
    zero = load_reference_solutions(path=SOURCE, model="DeepSeek-R1-Zero")
    assert zero.status(question(3)) is None and zero.status(question(0)) == NO_TRACE


def test_numina_problems_r1_solved_with_reasons() -> None:
    problems = load_numina_olympiads(path=NUMINA, per_answer_cap=None)
    result = keep_reference_solved(problems, load_reference_solutions(path=SOURCE))
    assert [p.question for p in result.kept] == [question(0), question(1), question(2)]
    assert result.skips.counts[NOT_SOLVED] == 1 and result.skips.total == len(problems) - 3
    assert result.skips.counts[NO_TRACE] == len(problems) - 4
    not_solved = next(p for p in problems if p.question == question(5))
    assert result.skips.examples[NOT_SOLVED] == [not_solved.id]


def test_question_normalisation() -> None:
    assert normalize_question("a\u00a0b\n\n c ") == "a b c"  # NFKC turns the no-break space into a space


def test_a_row_without_question_is_counted() -> None:
    rows = [{"model_name": "DeepSeek-R1", "question": " ", "verifier_score": 1}]
    solutions = load_reference_solutions(dataset=rows)
    assert solutions.skips.as_dict() == {"missing_field:question": 1} and not solutions.solved


def test_hub_path_narrows_columns_and_model(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    calls = []
    rows = [json.loads(line) for line in SOURCE.read_text(encoding="utf-8").splitlines()]

    def fake_load_dataset(repo, name, split, revision):  # noqa: ANN001, ANN202
        calls.append((repo, name, split, revision))
        return datasets.Dataset.from_list(rows)

    solutions = load_reference_solutions(hub=replace(GENERAL_THOUGHTS_HUB, loader=fake_load_dataset))
    assert calls == [("GeneralReasoning/GeneralThought-430K", None, "train", None)]
    assert solutions.solved == {
        normalize_question(question(0)): True,
        normalize_question(question(1)): True,
        normalize_question(question(2)): True,
        normalize_question(question(5)): False,
    }
    parquet = tmp_path / "gt.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    assert load_reference_solutions(path=parquet).solved == solutions.solved
