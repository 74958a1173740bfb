"""recovery.data.filters: hand-computed small cases, then the paper's chain over the 153 real traces."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from recovery.data import (
    Skips,
    answer_key,
    cap_per_answer,
    drop_longest,
    filter_closed,
    filter_correct,
    keep_solved_by_all,
    load_real_traces,
    select_original_traces,
)
from recovery.segment import parse_trace
from recovery.types import AnswerType, Grade, Problem, Verdict


def problem(pid: str, answer: str = "4") -> Problem:
    return Problem("math", f"question {pid}", answer, AnswerType.NUMERIC, "test", id=pid)


def pair(
    pid: str,
    model: str = "m1",
    reasoning: str = "a\n\nb",
    tail: str = "\\boxed{4}",
    closed: bool = True,
    answer: str = "4",
):
    text = f"<think>{reasoning}</think>{tail}" if closed else f"<think>{reasoning}"
    return problem(pid, answer), parse_trace(pid, model, text)


def test_filter_closed() -> None:
    items = [pair("p1"), pair("p2", closed=False), pair("p3")]
    result = filter_closed(items)
    assert [p.id for p, _ in result.kept] == ["p1", "p3"]
    assert result.skips.as_dict() == {"no_closing_think_tag": 1} and result.dropped == 1
    kept, skips = result  # unpacks like a tuple
    assert kept == result.kept and skips is result.skips
    assert filter_closed([t for _, t in items]).kept == [items[0][1], items[2][1]]  # bare traces work too


def test_filter_correct_in_process_and_with_a_grader() -> None:
    items = [pair("p1"), pair("p2", tail="\\boxed{5}"), pair("p3", tail="I do not know."), pair("p4", tail="so 4")]
    result = filter_correct(items)
    assert [p.id for p, _ in result.kept] == ["p1", "p4"]
    assert result.skips.as_dict() == {"not_correct:no_answer": 1, "not_correct:wrong": 1}

    class FakeGrader:
        def __init__(self) -> None:
            self.calls: list = []

        def grade_parts(self, batch):  # noqa: ANN001, ANN202
            self.calls.append(batch)
            return [Grade(Verdict.CORRECT if p.id != "p1" else Verdict.TIMEOUT) for _, p in batch]

    grader = FakeGrader()
    graded = filter_correct(items, grader=grader)
    parts = [t.answer_text if t.closed else t.text for _, t in items]  # each trace's graded part
    assert len(grader.calls) == 1 and [r for r, _ in grader.calls[0]] == parts
    assert [p.id for p, _ in graded.kept] == ["p2", "p3", "p4"] and graded.skips.as_dict() == {"not_correct:timeout": 1}
    with pytest.raises(TypeError, match="Trace or a"):
        filter_correct(["not a pair"])  # type: ignore[list-item]


def lengths_pairs(model: str, lengths: list[int], start: int = 0) -> list:
    return [pair(f"{model}-{i + start}", model, reasoning="x" * n) for i, n in enumerate(lengths)]


def test_drop_longest_hand_computed() -> None:
    # 1..100: the 98th percentile interpolates to 98.02, so 99 and 100 go.
    a = lengths_pairs("A", list(range(1, 101)))
    # 1..10: percentile 9.82, so only 10 goes.
    c = lengths_pairs("C", list(range(1, 11)))
    # All equal: nothing is strictly longer than the cut-off.
    b = lengths_pairs("B", [5] * 10)
    # Tie at the top: 8 × 1 and 2 × 9, percentile 9.0 — both 9s are kept together (never split).
    d = lengths_pairs("D", [1] * 8 + [9, 9])
    items = a + b + c + d
    result = drop_longest(items)
    assert result.skips.as_dict() == {"longest_2pct": 3}
    kept_ids = {t.id for _, t in result.kept}
    assert sorted((t.model, len(t.reasoning)) for _, t in items if t.id not in kept_ids) == [
        ("A", 99),
        ("A", 100),
        ("C", 10),
    ]
    assert result.kept == [item for item in items if item in result.kept]  # input order kept
    # Order-independent: shuffling the input drops the same traces.
    shuffled = items[:]
    random.Random(0).shuffle(shuffled)
    assert {t.id for _, t in drop_longest(shuffled).kept} == {t.id for _, t in result.kept}
    # Per model: model A alone loses the same two.
    assert len(drop_longest(a).kept) == 98
    assert drop_longest(a, fraction=0.0).kept == a
    assert drop_longest(a, fraction=0.1).skips.as_dict() == {"longest_10pct": 10}  # > 90.1
    with pytest.raises(ValueError, match="fraction"):
        drop_longest(a, fraction=1.0)


def test_drop_longest_matches_numpy_quantile() -> None:
    rng = random.Random(7)
    lengths = [rng.randint(1, 400) for _ in range(257)]
    items = lengths_pairs("R", lengths)
    cutoff = float(np.quantile(lengths, 0.98))
    expected = sum(1 for n in lengths if n > cutoff)
    assert drop_longest(items).dropped == expected


def test_keep_solved_by_all() -> None:
    items = [
        pair("p1", "m1"),
        pair("p1", "m2"),
        pair("p2", "m1"),
        pair("p3", "m2"),
        pair("p3", "m1"),
        pair("p3", "m2", reasoning="another\n\nsample"),
    ]
    result = keep_solved_by_all(items)
    kept = [(p.id, t.model) for p, t in result.kept]
    assert kept == [("p1", "m1"), ("p1", "m2"), ("p3", "m2"), ("p3", "m1"), ("p3", "m2")]
    assert result.skips.as_dict() == {"not_solved_by_all_models": 1}
    assert keep_solved_by_all(items, models=["m1"]).dropped == 0
    assert keep_solved_by_all(items, models=["m1", "m2", "m3"]).kept == []  # m3 solved nothing


def test_cap_per_answer() -> None:
    problems = [problem(f"p{i}", a) for i, a in enumerate(["5", "5", "5", "2", "2.0", "\\frac{4}{2}", "7"])]
    result = cap_per_answer(problems, cap=2)
    assert [p.id for p in result.kept] == ["p0", "p1", "p3", "p4", "p6"]
    assert result.skips.as_dict() == {"answer_cap": 2}
    assert answer_key("2.0") == answer_key("\\frac{4}{2}") == "2" and answer_key("50\\%") == "50%"
    assert answer_key("x  + 1", AnswerType.EXPRESSION) == "x + 1"
    # With pairs a problem counts once, however many traces it has.
    pairs = [pair("a", "m1", answer="5"), pair("a", "m2", answer="5"), pair("b", answer="5"), pair("c", answer="5")]
    capped = cap_per_answer(pairs, cap=2)
    assert [(p.id, t.model) for p, t in capped.kept] == [("a", "m1"), ("a", "m2"), ("b", "m1")]
    with pytest.raises(ValueError, match="cap"):
        cap_per_answer(problems, cap=0)


def test_select_original_traces_small() -> None:
    items = [
        pair("p1", "m1"),
        pair("p1", "m2"),
        pair("p2", "m1"),
        pair("p2", "m2", tail="\\boxed{3}"),  # m2 wrong on p2
        pair("p3", "m1"),
        pair("p3", "m2", closed=False),  # m2 never closed p3
    ]
    result = select_original_traces(items)
    assert [(p.id, t.model) for p, t in result.kept] == [("p1", "m1"), ("p1", "m2")]
    assert result.skips.as_dict() == {
        "no_closing_think_tag": 1,
        "not_correct:wrong": 1,
        "not_solved_by_all_models": 2,
    }


@pytest.fixture(scope="module")
def real(shared_data: Path):  # noqa: ANN201
    path = shared_data / "real_traces"
    if not (path / "thought_anchors_math_cots.jsonl").is_file():
        pytest.skip(f"{path} missing")
    return load_real_traces(path)


def test_chain_on_real_traces(real, shared_data: Path) -> None:  # noqa: ANN001
    rows = [json.loads(line) for line in (shared_data / "real_traces" / "thought_anchors_math_cots.jsonl").open()]
    authors = {f"thought_anchors_math/{r['problem_id']}": r["is_correct"] for r in rows}
    closed = filter_closed(real.pairs)
    assert len(closed.kept) == 144
    correct = filter_correct(closed.kept)
    ours = {p.id for p, _ in correct.kept}
    closed_ids = {p.id for p, _ in closed.kept}
    # Every closed trace the authors graded correct is correct here too; the 17 more are answers the
    # authors' string match missed (360^\circ vs 360, 135,\!000 vs 135000, a=-30.5 vs -30.5, ...).
    assert {i for i in closed_ids if authors[i]} <= ours
    assert {i for i in closed_ids - ours} <= {i for i in closed_ids if not authors[i]}
    assert len(ours) == 135
    lengths = [len(t.reasoning) for _, t in correct.kept]
    expected_drop = sum(1 for n in lengths if n > np.quantile(lengths, 0.98))
    assert expected_drop == 3
    chained = select_original_traces(real.pairs)
    assert len(chained.kept) == 135 - 3
    assert chained.skips.as_dict() == {"longest_2pct": 3, "no_closing_think_tag": 9, "not_correct:wrong": 9}
    assert isinstance(chained.skips, Skips) and "no_closing_think_tag: 9" in chained.skips.summary()
