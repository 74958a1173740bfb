"""recovery.data.reference_selection: the authors' per-model order, their length cut-off and the problem draw,
on hand-built traces with hand-computed expectations (the authors' own outputs: tests/reference)."""

from __future__ import annotations

import pytest

from recovery.data.reference_selection import (
    ANSWER_CAP,
    LONGEST,
    NOT_CLOSED,
    NOT_CORRECT,
    NOT_DRAWN,
    NOT_KEPT_BY_ALL,
    NOT_SOLVED_BY_ALL,
    Selection,
    draw_problems,
    length_cutoff,
    reference_selection,
)
from recovery.segment import parse_trace
from recovery.types import Problem


def problem(n: int, answer: str = "1") -> Problem:
    return Problem("math", f"question {n}", answer, "numeric", "test", id=f"p{n}")


def pair(n: int, model: str, *, closed: bool = True, answer_chars: int = 0, answer: str = "1"):
    text = f"<think>\nreasoning of {n}.\n" + ("</think>\n" if closed else "") + "x" * answer_chars + "\\boxed{1}"
    return problem(n, answer), parse_trace(f"p{n}", model, text)


def kept(selection: Selection) -> set[tuple[str, str]]:
    return {(trace.model, p.id) for p, trace in selection.kept}


@pytest.mark.parametrize(
    ("lengths", "expected"),
    [
        (list(range(1, 101)), 98),  # floor(0.98 · 100) - 1 = 97: the 98th length; 99 and 100 go
        (list(range(1, 51)), 49),  # floor(49.0) - 1 = 48: only the longest goes
        ([7], 7),  # max(0, floor(0.98) - 1) = 0: a single trace stays
        ([3, 9, 9], 9),  # floor(2.94) - 1 = 1: the longest ties are kept together
    ],
)
def test_length_cutoff_is_the_authors_index(lengths, expected):
    assert length_cutoff(lengths, 0.02) == expected


def test_no_fraction_keeps_everything():
    assert length_cutoff([1, 2, 3], 0.0) is None


def test_correct_then_intersection_then_per_model_steps():
    pairs = [
        pair(1, "A"),
        pair(1, "B"),
        pair(2, "A"),
        pair(2, "B"),  # B wrong on p2: p2 leaves both models
        pair(3, "A", closed=False),  # A's unclosed (correct) p3 leaves A only
        pair(3, "B"),
    ]
    correct = {trace.id for p, trace in pairs if (trace.model, p.id) != ("B", "p2")}
    selection = reference_selection(pairs, correct, ["A", "B"])
    assert kept(selection) == {("A", "p1"), ("B", "p1"), ("B", "p3")}
    reasons = {(t.model, p.id): selection.reasons[t.id] for p, t in pairs if t.id in selection.reasons}
    assert reasons == {("A", "p2"): NOT_SOLVED_BY_ALL, ("B", "p2"): NOT_CORRECT, ("A", "p3"): NOT_CLOSED}


def test_longest_is_the_whole_response_per_model_and_the_cap_counts_per_model():
    pairs = [pair(1, "A", answer="5"), pair(2, "A", answer="5"), pair(3, "A", answer_chars=500, answer="6")]
    pairs += [pair(n, "B", answer="5" if n < 3 else "6") for n in (1, 2, 3)]
    correct = {trace.id for _, trace in pairs}
    selection = reference_selection(pairs, correct, ["A", "B"], drop_longest_fraction=0.02, max_per_answer=1)
    # A: p3's long answer section makes it A's longest response (its reasoning is as long as the others).
    # B: "reasoning of 3" ties the others' length, so B's longest is one of equal length: all kept; then the
    # cap keeps one problem per answer per model.
    assert kept(selection) == {("A", "p1"), ("B", "p1"), ("B", "p3")}
    by_key = {(t.model, p.id): selection.reasons.get(t.id) for p, t in pairs}
    assert by_key[("A", "p3")] == LONGEST and by_key[("A", "p2")] == ANSWER_CAP and by_key[("B", "p2")] == ANSWER_CAP


def test_one_model_intersects_nothing():
    pairs = [pair(1, "A"), pair(2, "A")]
    selection = reference_selection(pairs, {pairs[0][1].id}, ["A"])
    assert kept(selection) == {("A", "p1")}


def test_draw_among_the_problems_every_model_kept():
    pairs = [pair(n, model) for n in range(12) for model in ("A", "B")]
    base = [pr for pr in pairs if (pr[1].model, pr[0].id) != ("B", "p0")]
    drawn = draw_problems(Selection(list(base)), ["A", "B"], 5, seed=3)
    chosen = {p.id for p, _ in drawn.kept}
    assert len(chosen) == 5 and "p0" not in chosen
    assert {t.model for _, t in drawn.kept} == {"A", "B"} and len(drawn.kept) == 10  # both models, same problems
    a_p0 = next(t.id for p, t in pairs if (t.model, p.id) == ("A", "p0"))
    assert drawn.reasons[a_p0] == NOT_KEPT_BY_ALL
    assert sum(reason == NOT_DRAWN for reason in drawn.reasons.values()) == 12
    # The same seed draws the same problems whatever the input order; a larger draw contains a smaller one.
    again = draw_problems(Selection(list(reversed(base))), ["A", "B"], 5, seed=3)
    assert {p.id for p, _ in again.kept} == chosen
    larger = draw_problems(Selection(list(base)), ["A", "B"], 8, seed=3)
    assert chosen < {p.id for p, _ in larger.kept}
    other = draw_problems(Selection(list(base)), ["A", "B"], 5, seed=4)
    assert {p.id for p, _ in other.kept} != chosen


def test_draw_larger_than_the_eligible_keeps_them_all():
    pairs = [pair(n, "A") for n in range(3)]
    assert len(draw_problems(Selection(pairs), ["A"], 600).kept) == 3
