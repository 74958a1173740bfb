import dataclasses

import pytest

from recovery.types import AnswerType, Category, Continuation, Grade, Intervened, Problem, Trace, Verdict


def make_problem(**kw):
    base = dict(domain="logic", question="Q?", answer="Yes", answer_type="yes_no", source="bbh/causal_judgement")
    return Problem(**{**base, **kw})


def test_problem_id_is_content_addressed_and_metadata_ignored():
    a = make_problem(metadata={"split": "test"})
    b = make_problem(metadata={"other": 1})
    assert a.id == b.id
    assert a == b
    assert make_problem(question="Q2?").id != a.id
    assert a.answer_type is AnswerType.YES_NO


def test_problem_is_frozen_and_metadata_read_only():
    p = make_problem(metadata={"k": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.question = "x"
    with pytest.raises(TypeError):
        p.metadata["k"] = 2


def test_explicit_id_is_kept():
    assert make_problem(id="bbh-1").id == "bbh-1"


def test_bad_enum_value_is_rejected():
    with pytest.raises(ValueError):
        make_problem(answer_type="colour")


def test_trace_and_continuation_ids():
    t1 = Trace("p", "m", "<think>a</think>b", "a", "b")
    t2 = Trace("p", "m2", "<think>a</think>b", "a", "b")
    assert t1.id != t2.id
    c = Continuation("chain", 3, "text")
    assert c.id == Continuation("chain", 3, "other text").id  # keyed by (chain, sample), not by text
    assert c.id != Continuation("chain", 4, "text").id


def test_intervened_id_depends_on_options():
    kw = dict(
        trace_id="t",
        problem_id="p",
        model="m",
        intervention="wikipedia_text",
        category="neutral",
        target_t=0.3,
        actual_t=0.31,
        cut_index=2,
        n_steps=9,
        prefix="x",
        inserted_text="x",
        original_prefix_chars=10,
        original_reasoning_chars=30,
    )
    a = Intervened(**kw)
    b = Intervened(**kw, options={"append_wait": True})
    assert a.id != b.id
    assert a.category is Category.NEUTRAL


def test_grade_correct_property():
    assert Grade("correct").correct
    assert not Grade(Verdict.TIMEOUT).correct
