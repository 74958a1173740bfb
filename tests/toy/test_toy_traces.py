"""R1-style toy traces: format, correctness, natural slips, determinism."""

from __future__ import annotations

import pytest

from recovery.segment import split_reasoning, split_steps
from recovery.toy.steps import (
    DOUBT_PHRASES,
    claim_is_correct,
    parse_step,
    render_position,
)
from recovery.toy.tasks import generate_problems, spec_of
from recovery.toy.traces import write_trace
from recovery.toy.verify import grade_toy

PROBLEMS = generate_problems(120, seed=7)


def test_trace_format_and_answer():
    for problem in PROBLEMS:
        trace = write_trace(problem, slip_rate=0.5)
        split = split_reasoning(trace.response)
        assert split.closed and split.reasoning == trace.reasoning
        assert split.answer_text == "\n\n" + f"The answer is \\boxed{{{problem.answer}}}."
        assert grade_toy(trace.response, problem).correct
        steps = split_steps(split.reasoning)
        assert [s.text for s in steps][:-1] == list(trace.steps[:-1])
        assert all(s.text.strip() for s in steps)
        assert trace.as_trace().reasoning == trace.reasoning


def test_clean_trace_steps_are_correct_claims():
    for problem in PROBLEMS:
        spec = spec_of(problem)
        trace = write_trace(problem, slip_rate=0.0)
        assert trace.slip_position is None
        claims = [parse_step(s, spec) for s in trace.steps]
        assert claims[0] is None  # the opening sentence
        assert [c.position for c in claims[1:]] == list(range(spec.n_ops + 2))
        assert all(claim_is_correct(c, spec) for c in claims[1:])


def test_slips_are_followed_by_doubt_and_correction():
    slipped = 0
    for problem in PROBLEMS:
        spec = spec_of(problem)
        trace = write_trace(problem, slip_rate=1.0)
        p = trace.slip_position
        assert p is not None and 1 <= p <= spec.n_ops
        wrong, fixed = trace.steps[p + 1], trace.steps[p + 2]
        wrong_claim, fixed_claim = parse_step(wrong, spec), parse_step(fixed, spec)
        assert wrong_claim.position == p and not claim_is_correct(wrong_claim, spec)
        assert fixed.startswith(DOUBT_PHRASES) and fixed_claim.doubt
        assert fixed_claim.position == p and claim_is_correct(fixed_claim, spec)
        slipped += 1
    assert slipped == len(PROBLEMS)


def test_slip_rate_is_a_fraction_of_traces():
    problems = generate_problems(1000, seed=3)
    rate = sum(write_trace(p, slip_rate=0.15).slip_position is not None for p in problems) / len(problems)
    assert 0.11 < rate < 0.19
    with pytest.raises(ValueError):
        write_trace(problems[0], slip_rate=1.5)


def test_same_seed_same_bytes_and_seed_matters():
    a = [write_trace(p, seed=1).response for p in PROBLEMS]
    b = [write_trace(p, seed=1).response for p in reversed(PROBLEMS)][::-1]  # order does not matter
    assert a == b
    c = [write_trace(p, seed=2).response for p in PROBLEMS]
    assert a != c


@pytest.mark.parametrize("style", ["canonical", "paraphrase", "other"])
def test_every_style_parses_back(style):
    for problem in PROBLEMS[:40]:
        spec = spec_of(problem)
        for position in range(spec.n_ops + 2):
            claim = parse_step(render_position(spec, position, style), spec)
            assert claim is not None and claim.style == style and claim.position == position
            assert claim_is_correct(claim, spec)
