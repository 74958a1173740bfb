"""R1-style toy traces: format, correctness, natural slips, determinism."""

from __future__ import annotations

import pytest

from recovery.segment import split_reasoning, split_steps
from recovery.toy.steps import (
    DOUBT_PHRASES,
    check_is_correct,
    claim_is_correct,
    is_check,
    parse_step,
    render_check,
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


def test_the_self_checking_style_checks_every_operation_step_and_draws_the_same_trace():
    """``checks=True``: each operation step, a slip's wrong one included, is followed by its right check;
    the doubt and corrected step (the reaction) come after the check that disagrees; apart from the checks
    the trace is the one written without them, and ``slip_step`` / ``reaction_step`` point where they say."""
    for problem in PROBLEMS:
        spec = spec_of(problem)
        plain = write_trace(problem, slip_rate=0.5)
        checked = write_trace(problem, slip_rate=0.5, checks=True)
        assert tuple(s for s in checked.steps if not is_check(s)) == plain.steps
        assert checked.slip_position == plain.slip_position
        assert grade_toy(checked.response, problem).correct
        for index, text in enumerate(checked.steps):
            if not is_check(text):
                continue
            step = parse_step(checked.steps[index - 1], spec)
            assert check_is_correct(text, spec) and text == render_check(spec, step.position)
            assert claim_is_correct(step, spec) == (index - 1 != checked.slip_step)
        assert sum(is_check(s) for s in checked.steps) == spec.n_ops + (checked.slip_step is not None)
        if checked.slip_position is None:
            assert checked.slip_step is checked.reaction_step is None
            continue
        wrong = parse_step(checked.steps[checked.slip_step], spec)
        assert wrong.position == checked.slip_position and not claim_is_correct(wrong, spec)
        assert checked.reaction_step == checked.slip_step + 2
        reaction = parse_step(checked.steps[checked.reaction_step], spec)
        assert reaction.doubt and reaction.position == wrong.position and claim_is_correct(reaction, spec)
        assert plain.steps[plain.slip_step] == checked.steps[checked.slip_step]
        assert plain.reaction_step == plain.slip_step + 1
