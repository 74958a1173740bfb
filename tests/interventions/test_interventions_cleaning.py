"""Cleaning LLM replies: labels, wrappers, empty / multi-step / repeated replies, and failure counting."""

from __future__ import annotations

from collections import Counter

import pytest

from recovery.interventions import (
    ChainSettings,
    FailureReason,
    InterventionFailed,
    Produced,
    Skip,
    TraceJob,
    clean_rewrite_reply,
    clean_step_reply,
    intervene_traces,
)
from recovery.interventions.cleaning import (
    COLLAPSED_BLANK_LINES,
    CUT_TO_FIRST_PARAGRAPH,
    DROPPED_REPEATED_PARAGRAPH,
    REMOVED_THINK_TAG,
    STRIPPED_CODE_FENCE,
    STRIPPED_LABEL,
    STRIPPED_WRAPPER,
)


@pytest.mark.parametrize(
    ("reply", "expected", "note"),
    [
        ("Next step: I need to add 3.", "I need to add 3.", STRIPPED_LABEL),
        ("Next (incorrect) step: I need to subtract.", "I need to subtract.", STRIPPED_LABEL),
        ("**Step 3:** I need to add 3.", "I need to add 3.", STRIPPED_LABEL),
        ("**Step 3**: I need to add 3.", "I need to add 3.", STRIPPED_LABEL),
        ("### Next step\nI need to add 3.", "I need to add 3.", STRIPPED_LABEL),
        ("Wrong statement: I know that every prime is odd.", "I know that every prime is odd.", STRIPPED_LABEL),
        (
            "Unrelated reasoning step about Photosynthesis: Okay, so I need to explain it.",
            "Okay, so I need to explain it.",
            STRIPPED_LABEL,
        ),
        ('"I need to add 3."', "I need to add 3.", STRIPPED_WRAPPER),
        ("“I remember that 2 is odd.”", "I remember that 2 is odd.", STRIPPED_WRAPPER),
        ("**I need to add 3.**", "I need to add 3.", STRIPPED_WRAPPER),
        ("```\nI need to add 3.\n```", "I need to add 3.", STRIPPED_CODE_FENCE),
        ("```text\nI need to add 3.\n```", "I need to add 3.", STRIPPED_CODE_FENCE),
        ("<think>I need to add 3.</think>", "I need to add 3.", REMOVED_THINK_TAG),
        ("  \n I need to add 3.  \n", "I need to add 3.", None),
    ],
)
def test_labels_and_wrappers_are_stripped(reply: str, expected: str, note: str | None) -> None:
    cleaned = clean_step_reply(reply)
    assert cleaned.text == expected
    if note is not None:
        assert note in cleaned.notes
    else:
        assert cleaned.notes == ()


def test_nested_wrappers_are_stripped_in_any_order() -> None:
    cleaned = clean_step_reply('Wrong statement: "**I know that 7 is even.**"')
    assert cleaned.text == "I know that 7 is even."
    assert STRIPPED_LABEL in cleaned.notes and STRIPPED_WRAPPER in cleaned.notes


@pytest.mark.parametrize(
    "reply",
    ["*a* + *b* = c", '"a" and "b" differ', "Step by step, x = 2.", "Next, I need to add 3.", "`x` and `y`"],
)
def test_text_that_only_looks_wrapped_is_kept(reply: str) -> None:
    assert clean_step_reply(reply).text == reply


@pytest.mark.parametrize("reply", ["", "   \n\t ", '""', "Next step:", "**Step 2:**", "```\n```", "<think></think>"])
def test_empty_replies_fail(reply: str) -> None:
    with pytest.raises(InterventionFailed) as info:
        clean_step_reply(reply)
    assert info.value.reason == FailureReason.EMPTY_REPLY == "empty_reply"


def test_multi_paragraph_policies() -> None:
    reply = "I need to add 3.\n\nThen I divide by 2.\n  \nDone."
    first = clean_step_reply(reply)
    assert first.text == "I need to add 3." and CUT_TO_FIRST_PARAGRAPH in first.notes
    collapsed = clean_step_reply(reply, multi_paragraph="collapse")
    assert collapsed.text == "I need to add 3.\nThen I divide by 2.\nDone." and COLLAPSED_BLANK_LINES in collapsed.notes
    assert "\n\n" not in collapsed.text
    with pytest.raises(InterventionFailed) as info:
        clean_step_reply(reply, multi_paragraph="reject")
    assert info.value.reason == FailureReason.MULTI_STEP
    with pytest.raises(ValueError):
        clean_step_reply(reply, multi_paragraph="bogus")  # type: ignore[arg-type]


def test_label_on_its_own_paragraph_before_the_step() -> None:
    assert clean_step_reply("**Next step:**\n\nI need to add 3.").text == "I need to add 3."


def test_repeated_prefix_fails_or_is_dropped() -> None:
    seen = "Let x = 2.\n\nThen y = x + 3 = 5."
    with pytest.raises(InterventionFailed) as info:
        clean_step_reply("Then y = x + 3 = 5.", seen=seen)
    assert info.value.reason == FailureReason.REPEATS_PREFIX
    with pytest.raises(InterventionFailed):
        clean_step_reply(seen, seen=seen)  # echoing everything
    cleaned = clean_step_reply("Then  y = x + 3 = 5.\n\nSo 2y = 10.", seen=seen)  # whitespace differs
    assert cleaned.text == "So 2y = 10." and DROPPED_REPEATED_PARAGRAPH in cleaned.notes
    assert clean_step_reply("So 2y = 10.", seen=seen).text == "So 2y = 10."


def test_non_string_reply_is_a_generator_error() -> None:
    with pytest.raises(InterventionFailed) as info:
        clean_step_reply(None)
    assert info.value.reason == FailureReason.GENERATOR_ERROR


def test_rewrite_is_resplit_on_blank_lines() -> None:
    steps, notes = clean_rewrite_reply("Rewritten trace:\nFirst, x is 2.\n\n\n\nNext, y is 5.\n \nSo 10.", original="x")
    assert steps == ("First, x is 2.", "Next, y is 5.", "So 10.")
    assert STRIPPED_LABEL in notes
    with pytest.raises(InterventionFailed) as info:
        clean_rewrite_reply("Let x = 2.\n\nThen  y = 5.", original="Let x = 2.\n\nThen y = 5.")
    assert info.value.reason == FailureReason.REPEATS_PREFIX
    with pytest.raises(InterventionFailed) as info:
        clean_rewrite_reply("  ", original="x")
    assert info.value.reason == FailureReason.EMPTY_REPLY


def test_failure_vocabulary_is_fixed() -> None:
    assert {r.value for r in FailureReason} == {
        "empty_reply",
        "repeats_prefix",
        "multi_step",
        "generator_error",
        "step_too_short",
        "between_unavailable",
        "truncated_rewrite",
        "not_a_rewrite",
    }


ORIGINAL = (
    "Okay, so I need to find m^2 + 1/m^2 given that m + 1/m = 8. I remember that squaring an expression like "
    "this brings out the squares I want.\n\nSquaring both sides gives (m + 1/m)^2 = 64, and the left side "
    "expands to m^2 + 2 + 1/m^2.\n\nSo m^2 + 1/m^2 = 64 - 2 = 62, and I should double-check the expansion."
)


def test_a_chat_reply_is_not_a_rewrite() -> None:
    """A small instruct model answered the paraphrase prompt with "I'm ready to help. What's the next step?",
    which replaced the whole prefix; far shorter than what it rewrites, it is a counted failure."""
    with pytest.raises(InterventionFailed) as info:
        clean_rewrite_reply("I'm ready to help. What's the next step?", original=ORIGINAL)
    assert info.value.reason == FailureReason.NOT_A_REWRITE
    shorter = "We need m^2 + 1/m^2 with m + 1/m = 8.\n\nSquare: m^2 + 2 + 1/m^2 = 64, so it is 62."
    assert clean_rewrite_reply(shorter, original=ORIGINAL)[0][1].startswith("Square")  # a terse rewrite is one


def test_a_truncated_rewrite_fails_and_a_truncated_step_is_noted(small_item) -> None:  # noqa: ANN001
    from recovery.generation import GeneratedText
    from recovery.interventions import create
    from recovery.interventions.cleaning import TRUNCATED_STEP

    cut = GeneratedText(ORIGINAL.replace("Okay", "Alright")[:-10], truncated=True)
    with pytest.raises(InterventionFailed) as info:
        clean_rewrite_reply(cut, original=ORIGINAL)
    assert info.value.reason == FailureReason.TRUNCATED_REWRITE
    problem, trace = small_item
    impl = create("complete_step")

    def complete_step(reply: GeneratedText):
        settings = ChainSettings({"complete_step": impl}, (0.5,), generator=lambda messages, decoding: reply)
        (out,) = intervene_traces([TraceJob(problem, trace)], settings)
        return out.chain, out.notes

    step = GeneratedText("We need to square both sides of the", truncated=True)
    chain, notes = complete_step(step)
    assert chain.inserted_text == str(step) and TRUNCATED_STEP in notes
    assert TRUNCATED_STEP not in complete_step(GeneratedText(str(step)))[1]


def test_failures_are_counted_not_raised(make_item, fake_generator) -> None:  # noqa: ANN001
    # Steps of 10, 11, 11, 10 chars: t=0.5 → cut 1 (shows step 0), 0.7 → cut 2, 0.9 → cut 3.
    items = [make_item(["Let x = 2.", "Then y = 5.", "So 2y = 10.", f"Variant {i}."]) for i in range(3)]
    replies = iter(["", "Next step: I need to add.", "Then y = 5.", "A.\n\nB."] * 3)
    generator = fake_generator(lambda messages, decoding: next(replies))
    settings = ChainSettings.from_names(["complete_step"], timesteps=[0.5, 0.7, 0.9], generator=generator)
    out = list(intervene_traces([TraceJob(*item) for item in items], settings))
    produced = [o for o in out if isinstance(o, Produced)]
    skips = [o for o in out if isinstance(o, Skip)]
    # item 0: empty, label, repeat (step 1 shown) · item 1: two paragraphs, empty, label ·
    # item 2: "Then y = 5." is new at t=0.5 (only step 0 shown), two paragraphs, empty.
    assert Counter(skip.reason for skip in skips) == {"empty_reply": 3, "repeats_prefix": 1}
    assert Counter(o.chain.intervention for o in produced) == {"complete_step": 5} and len(produced) == 5
    notes = Counter((o.chain.intervention, note) for o in produced for note in o.notes)
    assert notes == {("complete_step", STRIPPED_LABEL): 2, ("complete_step", CUT_TO_FIRST_PARAGRAPH): 2}
    assert [skip.target_t for skip in skips] == [0.5, 0.9, 0.7, 0.9]
    assert {skip.intervention for skip in skips} == {"complete_step"}
