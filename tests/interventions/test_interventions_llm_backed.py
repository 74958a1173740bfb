"""LLM-backed interventions with a fake generator: exact prompts (App. D.1), decoding (Table 15), placement."""

from __future__ import annotations

import pytest

from recovery.generation import Decoding
from recovery.interventions import FailureReason, InterventionFailed, UnrelatedCoT, intervene, load_topics, template_for

SAMPLED = Decoding(temperature=0.7, top_p=0.9, top_k=None, seed=80129)
GREEDY = Decoding(temperature=0.0, top_p=1.0, top_k=None, seed=None)
QUESTION = "What is 2y if x = 2 and y = x + 3?"


def _only_call(generator):  # noqa: ANN001, ANN202
    assert len(generator.calls) == 1
    return generator.calls[0]


@pytest.mark.parametrize(
    ("name", "label", "decoding", "category"),
    [
        ("complete_step", "Next step:", GREEDY, "benign"),
        ("wrong_continuation", "Next (incorrect) step:", SAMPLED, "adversarial"),
    ],
)
def test_replace_type_sees_steps_before_r_k(  # noqa: ANN001
    small_item, fake_generator, name, label, decoding, category
) -> None:
    problem, trace = small_item
    generator = fake_generator("I need to double y to get 12.")
    out = intervene(problem, trace, name, 0.7, generator=generator)  # cut at step 2 ("So 2y = 10.")
    messages, got = _only_call(generator)
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == template_for(name).system
    assert messages[1].content == (
        f"Problem:\n{QUESTION}\nReasoning so far:\nLet x = 2.\n\nThen y = x + 3 = 5.\n{label}"
    )
    assert got == decoding
    assert out.prefix == "Let x = 2.\n\nThen y = x + 3 = 5.\n\nI need to double y to get 12."
    assert out.inserted_text == "I need to double y to get 12."
    assert out.category == category and out.cut_index == 2


def test_hallucinated_fact_is_appended_after_r_k(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("Wrong statement: I know that 2y always equals y + 3.")
    out = intervene(problem, trace, "hallucinated_fact", 0.7, generator=generator)
    messages, got = _only_call(generator)
    assert messages[1].content == (
        f"Problem:\n{QUESTION}\nReasoning so far:\nLet x = 2.\n\nThen y = x + 3 = 5.\n\nSo 2y = 10.\nWrong statement:"
    )
    assert got == SAMPLED
    assert out.prefix == "Let x = 2.\n\nThen y = x + 3 = 5.\n\nSo 2y = 10.\n\nI know that 2y always equals y + 3."
    assert out.inserted_text == "I know that 2y always equals y + 3."
    assert out.category == "adversarial"


def test_paraphrase_rewrites_whole_prefix(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator()  # rewrites each shown step
    out = intervene(problem, trace, "paraphrase", 0.7, generator=generator)
    messages, got = _only_call(generator)
    assert messages[1].content == (
        f"Problem:\n{QUESTION}\nOriginal reasoning trace:\nLet x = 2.\n\nThen y = x + 3 = 5.\n\nSo 2y = 10.\n"
        "Rewritten trace:"
    )
    assert got == Decoding(temperature=0.0, top_p=1.0, top_k=None, seed=None, max_new_tokens=8192)
    expected = "In other words, Let x = 2.\n\nIn other words, Then y = x + 3 = 5.\n\nIn other words, So 2y = 10."
    assert out.prefix == expected and out.inserted_text == expected


def test_paraphrase_reply_is_resplit(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("Rewritten trace:\nWe set x to 2.\n\n\n\nHence y is 5 and 2y is 10.")
    out = intervene(problem, trace, "paraphrase", 0.7, generator=generator)
    assert out.prefix == "We set x to 2.\n\nHence y is 5 and 2y is 10."


def test_unrelated_cot_sees_only_the_topic(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("Okay, so I need to think about how coral bleaching works.")
    out = intervene(problem, trace, "unrelated_cot", 0.7, generator=generator)
    messages, got = _only_call(generator)
    assert got == Decoding(temperature=1.0, top_p=0.9, top_k=None, seed=80129)
    user = messages[1].content
    topic = user.split("\n", 1)[0].removeprefix("Topic: ")
    assert topic in load_topics()
    assert user == f"Topic: {topic}\nUnrelated reasoning step about {topic}:"
    assert all(QUESTION not in m.content and "2y" not in m.content for m in messages)
    assert out.prefix == "\n\n".join(
        ["Let x = 2.", "Then y = x + 3 = 5.", "Okay, so I need to think about how coral bleaching works."]
    )


def test_unrelated_topics_vary_per_item_and_repeat_per_key(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item

    def topic_for(seed: int) -> str:
        generator = fake_generator("Okay, so I need to think.")
        intervene(problem, trace, "unrelated_cot", 0.7, seed=seed, generator=generator)
        return generator.calls[0][0][1].content

    assert topic_for(5) == topic_for(5)
    assert len({topic_for(s) for s in range(30)}) > 10


def test_unrelated_custom_topics(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("Okay, so tides.")
    intervene(problem, trace, UnrelatedCoT(topics=("Tides",)), 0.7, generator=generator)
    assert generator.calls[0][0][1].content == "Topic: Tides\nUnrelated reasoning step about Tides:"
    with pytest.raises(ValueError):
        UnrelatedCoT(topics=())


def test_decoding_override(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("I need to x.")
    custom = Decoding(temperature=0.3, seed=1)
    intervene(problem, trace, "wrong_continuation", 0.7, generator=generator, decoding=custom)
    assert generator.calls[0][1] == custom


@pytest.mark.parametrize(
    ("name", "table_15"), [("complete_step", GREEDY), ("wrong_continuation", SAMPLED), ("hallucinated_fact", SAMPLED)]
)
def test_max_new_tokens_bounds_a_step_and_keeps_table_15(small_item, fake_generator, name, table_15) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("I need to x.")
    intervene(problem, trace, name, 0.7, generator=generator, max_new_tokens=16)
    got = generator.calls[0][1]
    assert got.max_new_tokens == 16
    assert (got.temperature, got.top_p, got.top_k, got.seed) == (
        table_15.temperature,
        table_15.top_p,
        None,
        table_15.seed,
    )
    with pytest.raises(ValueError, match="max_new_tokens inside decoding"):
        intervene(problem, trace, name, 0.7, generator=generator, max_new_tokens=16, decoding=GREEDY)
    with pytest.raises(ValueError, match="max_new_tokens must be"):
        intervene(problem, trace, name, 0.7, generator=generator, max_new_tokens=0)


def test_multi_paragraph_policy_option(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item
    generator = fake_generator("I need to square y:\n\n\\[ y^2 = 25 \\]")
    first = intervene(problem, trace, "wrong_continuation", 0.7, generator=generator)
    assert first.inserted_text == "I need to square y:"
    collapsed = intervene(problem, trace, "wrong_continuation", 0.7, generator=generator, multi_paragraph="collapse")
    assert collapsed.inserted_text == "I need to square y:\n\\[ y^2 = 25 \\]"
    assert collapsed.id != first.id
    with pytest.raises(InterventionFailed) as info:
        intervene(problem, trace, "wrong_continuation", 0.7, generator=generator, multi_paragraph="reject")
    assert info.value.reason == FailureReason.MULTI_STEP


def test_generator_errors_become_counted_failures(small_item, fake_generator) -> None:  # noqa: ANN001
    problem, trace = small_item

    def broken(messages, decoding):  # noqa: ANN001, ANN202
        raise ConnectionError("server down")

    with pytest.raises(InterventionFailed) as info:
        intervene(problem, trace, "complete_step", 0.7, generator=fake_generator(broken))
    assert info.value.reason == FailureReason.GENERATOR_ERROR and "server down" in str(info.value)
    with pytest.raises(InterventionFailed) as info:
        intervene(problem, trace, "complete_step", 0.7, generator=fake_generator(lambda m, d: None))
    assert info.value.reason == FailureReason.GENERATOR_ERROR


@pytest.mark.parametrize(
    "name", ["complete_step", "paraphrase", "wrong_continuation", "hallucinated_fact", "unrelated_cot"]
)
def test_missing_generator_is_a_setup_error(small_item, name: str) -> None:  # noqa: ANN001
    problem, trace = small_item
    with pytest.raises(ValueError, match="generator"):
        intervene(problem, trace, name, 0.5)
