"""recovery.data.numina on a 30-row fixture in the AI-MO/NuminaMath-CoT schema (the Hub is unreachable here).

The fixture (fixtures/numina_olympiads_sample.jsonl) has 26 olympiads rows and 4 of other sources. Row by
row (index: last boxed answer): 0,1,2,11,14,23: 5 (14 repeats row 0's problem text) · 3,16: 2 · 5: 2.0 ·
6: \\frac{1}{2} · 7: x^2 + 1 · 8: no box · 9: 12 \\text{ cm} · 10: -3.5 · 13: 7 then 9 (last wins) ·
15: 1{,}000 · 17: 0.25 · 18: solution missing · 19: 1000 · 21,24: 12 · 22: empty box · 25: 3.14 ·
26: 1e-3 · 27: \\sqrt{2} · 28: 9.  Hand-computed expectations below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.data import Skips, load_numina_olympiads, load_problems
from recovery.data.numina import numeric_answer
from recovery.data.sources import RowError
from recovery.grading import grade_response
from recovery.types import AnswerType

FIXTURE = Path(__file__).parent / "fixtures" / "numina_olympiads_sample.jsonl"

# Float mode ("parsed as a floating-point number or integer"): 17 problems, by fixture row.
FLOAT_ROWS = [0, 1, 2, 3, 5, 10, 11, 13, 16, 17, 19, 21, 23, 24, 25, 26, 28]
FLOAT_SKIPS = {"answer_not_numeric": 5, "duplicate_problem": 1, "missing_field:solution": 1, "no_boxed_answer": 2}
# cap=2: answer 5 keeps rows 0, 1 (2, 11, 23 go); 2 keeps 3 and 5 ("2.0"), 16 goes.
FLOAT_CAP2_ROWS = [0, 1, 3, 5, 10, 13, 17, 19, 21, 24, 25, 26, 28]
# Grading mode also reads \frac{1}{2} (6), 12 \text{ cm} (9) and 1{,}000 (15).
GRADING_ROWS = sorted(FLOAT_ROWS + [6, 9, 15])
# cap=2 in grading mode: 12 keeps rows 9, 21 (24 goes); 1000 keeps 15 and 19.
GRADING_CAP2_ROWS = [0, 1, 3, 5, 6, 9, 10, 13, 15, 17, 19, 21, 25, 26, 28]


def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def row_numbers(problems) -> list[int]:  # noqa: ANN001
    return [int(p.question.split(":")[0].split()[1]) for p in problems]


def test_float_mode_without_cap() -> None:
    skips = Skips()
    problems = load_numina_olympiads(path=FIXTURE, per_answer_cap=None, skips=skips)
    assert row_numbers(problems) == FLOAT_ROWS
    assert skips.as_dict() == FLOAT_SKIPS
    by_row = dict(zip(row_numbers(problems), problems))
    assert by_row[13].answer == "9"  # the last \boxed{} of the solution
    assert by_row[5].answer == "2.0" and by_row[26].answer == "1e-3"
    for problem in problems:
        assert problem.domain == "math" and problem.answer_type is AnswerType.NUMERIC
        assert problem.source == "numina_olympiads" and problem.id.startswith("numina_olympiads/")
        assert problem.metadata["numina_source"] == "olympiads"


def test_cap_two_per_distinct_value() -> None:
    skips = Skips()
    problems = load_numina_olympiads(path=FIXTURE, per_answer_cap=2, skips=skips)
    assert row_numbers(problems) == FLOAT_CAP2_ROWS
    assert skips.counts["answer_cap"] == 4
    assert skips.as_dict() == {**FLOAT_SKIPS, "answer_cap": 4}


def test_grading_mode_reads_fractions_units_and_separators() -> None:
    assert row_numbers(load_numina_olympiads(path=FIXTURE, numeric="grading", per_answer_cap=None)) == GRADING_ROWS
    skips = Skips()
    capped = load_numina_olympiads(path=FIXTURE, numeric="grading", per_answer_cap=2, skips=skips)
    assert row_numbers(capped) == GRADING_CAP2_ROWS
    assert skips.counts["answer_cap"] == 5 and skips.counts["answer_not_numeric"] == 2


def test_default_cap_is_twenty_and_changes_nothing_here() -> None:
    assert row_numbers(load_numina_olympiads(path=FIXTURE)) == FLOAT_ROWS


def test_ids_are_content_based_and_stable() -> None:
    first = load_numina_olympiads(path=FIXTURE)
    # Dropping the other-source rows (as a local olympiads-only dump would) must not change any id.
    only_olympiads = [r for r in rows() if r["source"] == "olympiads"]
    second = load_numina_olympiads(dataset=only_olympiads)
    assert [p.id for p in first] == [p.id for p in second]
    assert len({p.id for p in first}) == len(first)


def test_hub_path_with_injected_loader() -> None:
    from datasets import Dataset

    calls = []

    def fake_load_dataset(repo, name, split, revision):  # noqa: ANN001, ANN202
        calls.append((repo, name, split, revision))
        return Dataset.from_list(rows())

    problems = load_problems("numina_olympiads", loader=fake_load_dataset, per_answer_cap=2)
    assert calls == [("AI-MO/NuminaMath-CoT", None, "train", None)]
    assert row_numbers(problems) == FLOAT_CAP2_ROWS


def test_in_memory_dataset_and_parquet_give_the_same(tmp_path: Path) -> None:
    from datasets import Dataset

    dataset = Dataset.from_list(rows())
    from_dataset = load_numina_olympiads(dataset=dataset, per_answer_cap=2)
    parquet = tmp_path / "numina.parquet"
    dataset.to_parquet(str(parquet))
    from_parquet = load_numina_olympiads(path=parquet, per_answer_cap=2)
    assert [p.id for p in from_dataset] == [p.id for p in from_parquet]
    assert row_numbers(from_dataset) == FLOAT_CAP2_ROWS


def test_registry_name_and_gold_self_grading() -> None:
    problems = load_problems("numina_olympiads", path=FIXTURE, numeric="grading", per_answer_cap=None)
    assert row_numbers(problems) == GRADING_ROWS
    for problem in problems:
        assert grade_response(f"\\boxed{{{problem.answer}}}", problem).correct, problem.answer


def test_strict_names_the_row() -> None:
    with pytest.raises(RowError, match=r"numina_olympiads_sample\.jsonl line 7: answer_not_numeric"):
        load_numina_olympiads(path=FIXTURE, strict=True)


def test_numeric_answer_modes() -> None:
    assert numeric_answer(" 12 ") is None and numeric_answer("-.5") is None and numeric_answer("3e5") is None
    assert numeric_answer("1,000") == "answer_not_numeric"  # not a float() literal
    assert numeric_answer("1,000", "grading") is None
    assert numeric_answer("nan") == numeric_answer("inf") == "answer_not_numeric"
    with pytest.raises(ValueError, match="numeric mode"):
        numeric_answer("1", "loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per_answer_cap"):
        load_numina_olympiads(path=FIXTURE, per_answer_cap=0)
