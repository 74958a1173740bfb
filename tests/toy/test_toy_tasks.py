"""Toy problem families: exact answers, parseable questions, and same seed → same bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.toy.tasks import (
    ArithSpec,
    SwapSpec,
    ToyParseError,
    ToyTaskConfig,
    generate_problem,
    generate_problems,
    is_toy_problem,
    make_problem,
    parse_question,
    spec_of,
)
from recovery.types import AnswerType, Problem


def test_arith_answer_by_hand():
    spec = parse_question("Start with 7. Step A: add 5. Step B: subtract 3. Step C: add 8. What is the final number?")
    assert isinstance(spec, ArithSpec)
    assert [spec.state(k) for k in range(4)] == [7, 12, 9, 17]
    assert spec.answer == "17"


def test_swap_answer_by_hand():
    question = (
        "Ann, Ben and Cal pass a ball around. Ben holds it first. "
        "Step A: Ann and Ben swap. Step B: Ben and Cal swap. Step C: Ann and Cal swap. Who holds the ball at the end?"
    )
    spec = parse_question(question)
    assert isinstance(spec, SwapSpec)
    assert [spec.state(k) for k in range(4)] == ["Ben", "Ann", "Ann", "Cal"]
    assert spec.answer == "Cal"


def test_item_depends_only_on_seed_plus_idx():
    batch = generate_problems(20, seed=5)
    assert [generate_problem(i, seed=5) for i in reversed(range(20))][::-1] == batch
    # reasoning-gym convention: item idx of seed s is Random(s + idx), whichever dataset it belongs to
    # (same family: idx 2 and idx 0 are both arithmetic)
    assert generate_problem(2, seed=10).question == generate_problem(0, seed=12).question
    assert generate_problem(3, seed=10).question != generate_problem(3, seed=11).question


def test_families_alternate_and_answer_types():
    problems = generate_problems(10, seed=0)
    assert [p.source for p in problems[:4]] == ["toy/arith", "toy/swap", "toy/arith", "toy/swap"]
    for p in problems:
        assert p.domain == "toy"
        assert p.answer_type is (AnswerType.NUMERIC if p.source == "toy/arith" else AnswerType.EXACT)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**9), idx=st.integers(0, 10**6))
def test_question_round_trips_and_sizes(seed, idx):
    cfg = ToyTaskConfig()
    problem = generate_problem(idx, seed=seed, config=cfg)
    spec = parse_question(problem.question)
    assert make_problem(spec).question == problem.question
    assert spec.answer == problem.answer
    if isinstance(spec, ArithSpec):
        assert cfg.min_ops <= spec.n_ops <= cfg.max_ops
        assert all(0 <= spec.state(k) <= cfg.max_value for k in range(spec.n_ops + 1))
    else:
        assert cfg.min_swaps <= spec.n_ops <= cfg.max_swaps
        assert spec.answer in spec.names and len(set(spec.names)) == cfg.n_people


def test_config_validation_and_single_family():
    with pytest.raises(ValueError):
        ToyTaskConfig(families=("chess",))
    with pytest.raises(ValueError):
        ToyTaskConfig(min_ops=5, max_ops=3)
    only_swaps = generate_problems(4, seed=1, config=ToyTaskConfig(families=("swap",)))
    assert {p.source for p in only_swaps} == {"toy/swap"}


def test_non_toy_questions_are_rejected():
    other = Problem(domain="math", question="What is 2 + 2?", answer="4", answer_type="numeric", source="x")
    assert not is_toy_problem(other)
    with pytest.raises(ToyParseError):
        spec_of(other)


def test_same_seed_same_bytes_across_many_items():
    a = "\n".join(p.question + "|" + p.answer + "|" + p.id for p in generate_problems(300, seed=42))
    b = "\n".join(p.question + "|" + p.answer + "|" + p.id for p in generate_problems(300, seed=42))
    assert a == b
    rng_state = random.getstate()
    random.seed(123)  # the global generator must not matter
    c = "\n".join(p.question + "|" + p.answer + "|" + p.id for p in generate_problems(300, seed=42))
    random.setstate(rng_state)
    assert a == c
