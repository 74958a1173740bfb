"""Each quality filter on hand-made good and bad continuations of a real intervened toy chain."""

from __future__ import annotations

import re

import pytest

from recovery.toy import recovery_continuation
from recovery.training_data import Candidate, Drops, QualityConfig, assess, final_answer_problem, select
from recovery.types import Intervened, Problem

NO_CAP = QualityConfig(max_overhead_pct=None)


@pytest.fixture(scope="module")
def arith(toy_run):
    """An arithmetic chain cut early (so the recovery writes several steps) and its teacher recovery."""
    problem, chain = next(
        (p, c)
        for p, c in toy_run.chains
        if p.source == "toy/arith" and c.intervention == "toy/complete_step" and c.target_t == 0.3
    )
    good = recovery_continuation(problem, chain.prefix).text
    assert good.startswith("\n\n") and good.count("\n\n") >= 3
    return problem, chain, good


def cand(problem, chain, text, *, correct=True, origin="own", index=0) -> Candidate:
    return Candidate(chain, problem, text, origin, correct, index)


def reason(problem, chain, text, config=NO_CAP, correct=True):
    return assess(cand(problem, chain, text, correct=correct), config).reason


def test_good_passes(arith):
    problem, chain, good = arith
    assert reason(problem, chain, good) is None
    assert reason(problem, chain, good, QualityConfig()) is None  # within the default overhead cap


def test_not_correct_and_ungraded(arith):
    problem, chain, good = arith
    assert reason(problem, chain, good, correct=False) == "not_correct"
    assert reason(problem, chain, good, correct=None) == "ungraded"


def test_closing_tags(arith):
    problem, chain, good = arith
    assert reason(problem, chain, good.replace("</think>", "</think>\n</think>")) == "think_close_count"
    assert reason(problem, chain, good.replace("</think>", "")) == "think_close_count"
    assert reason(problem, chain, "<think>\n" + good) == "think_reopened"


def test_final_answer_at_end(arith):
    problem, chain, good = arith
    boxed = f"\\boxed{{{problem.answer}}}"
    assert reason(problem, chain, good + " Let me also say more words here.") == "answer_not_at_end"
    assert reason(problem, chain, good.replace(boxed, f"{boxed} or {boxed}")) == "multiple_final_answers"
    assert reason(problem, chain, good.replace(boxed, problem.answer)) == "no_final_answer"
    assert reason(problem, chain, good.rstrip(".") + "$.\n") is None  # closing punctuation is fine
    assert final_answer_problem("The answer is \\boxed{\\frac{1}{2}}.") is None
    assert final_answer_problem("\\boxed{3") == "unclosed_final_answer"


def test_wrong_and_unverifiable_steps(arith):
    problem, chain, good = arith
    steps = good.split("\n\n")
    # change the result of the first operation step the continuation writes ("… = 8." → "… = 9.")
    index = next(i for i, s in enumerate(steps) if re.search(r"= -?\d+\.$", s))
    wrong = steps.copy()
    wrong[index] = re.sub(r"= (-?\d+)\.$", lambda m: f"= {int(m.group(1)) + 1}.", wrong[index])
    assert reason(problem, chain, "\n\n".join(wrong)) == "wrong_step"
    garbage = steps.copy()
    garbage.insert(index, "Bananas are yellow.")
    assert reason(problem, chain, "\n\n".join(garbage)) == "unverifiable_step"
    lenient = QualityConfig(max_overhead_pct=None, allow_unparsed_steps=True)
    assert reason(problem, chain, "\n\n".join(garbage), lenient) is None
    unchecked = QualityConfig(verify_steps=False, max_overhead_pct=None)
    assert reason(problem, chain, "\n\n".join(garbage), unchecked) is None


def test_steps_not_checked_outside_the_toy_world(arith):
    _, chain, good = arith
    math = Problem("math", "What is 7 - 1?", arith[0].answer, "numeric", "numina")
    other = Intervened(**{**{f: getattr(chain, f) for f in chain.__slots__ if f != "id"}, "problem_id": math.id})
    assert reason(math, other, good.replace("\n\n", "\n\nBananas are yellow.\n\n", 1)) is None


def test_doubt_optional(arith):
    problem, chain, good = arith
    config = QualityConfig(max_overhead_pct=None, require_doubt=True)
    assert reason(problem, chain, good, config) == "no_doubt"
    doubtful = recovery_continuation(problem, chain.prefix, doubt=True).text
    result = assess(cand(problem, chain, doubtful), config)
    assert result.ok and result.doubt == "wait"


def test_length_overhead_cap(arith):
    problem, chain, good = arith
    steps = good.split("\n\n")
    padded = "\n\n".join(steps[:2] + [steps[1]] * 12 + steps[2:])  # redoing a correct step is still correct
    assert reason(problem, chain, padded) is None  # no cap
    assert reason(problem, chain, padded, QualityConfig(max_overhead_pct=50.0)) == "length_overhead"
    remaining = QualityConfig(max_overhead_pct=50.0, overhead_basis="remaining")
    assert reason(problem, chain, padded, remaining) == "length_overhead"
    assert reason(problem, chain, good, remaining) is None


def test_shortest_of_n(arith):
    problem, chain, good = arith
    steps = good.split("\n\n")
    longer = "\n\n".join([*steps[:2], steps[1], *steps[2:]])
    longest = "\n\n".join(steps[:2] + [steps[1]] * 2 + steps[2:])
    cands = [
        cand(problem, chain, longest, index=0),
        cand(problem, chain, good, index=1),
        cand(problem, chain, longer, index=2),
        cand(problem, chain, good, index=3),
        cand(problem, chain, good, correct=False, index=4),
        cand(problem, chain, longest, origin="teacher"),
    ]
    drops = Drops()
    kept = select(cands, NO_CAP, drops)
    # one per (chain, origin): the shortest correct own sample (first of the tied ones) and the teacher's
    assert [(c.origin, c.sample_index) for c, _ in kept] == [("own", 1), ("teacher", 0)]
    assert drops.get("quality", "not_shortest") == 3 and drops.get("quality", "not_correct") == 1
    every = select(cands, QualityConfig(max_overhead_pct=None, shortest_of_n=False), Drops())
    assert len(every) == 5
