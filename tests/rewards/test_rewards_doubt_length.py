"""DoubtReward and LengthOverheadReward: hand-computed rewards, None where they cannot score."""

from __future__ import annotations

import math

import pytest

from recovery.rewards import CorrectnessReward, DoubtReward, LengthOverheadReward, RecoveryReward, overhead_penalty


# -- doubt ---------------------------------------------------------------------------------------------------
def test_doubt_in_the_first_sentences():
    reward = DoubtReward(pay_for="expression", only_intervened=False)  # the lexical window alone
    completions = [
        "\n\nWait, that step is wrong. 3 + 4 = 7.</think>7",  # first sentence
        "\n\nSo 3 + 4 = 7. Then 7 * 2 = 14. Hmm, 14 it is.</think>14",  # third sentence
        "\n\nSo 3 + 4 = 7. Then 7 * 2 = 14. Next 14 - 1 = 13. Wait, 13.</think>13",  # fourth: too late
        "\n\nSo 3 + 4 = 7.</think>Wait, the answer is 7.",  # after </think>: not reasoning
        "",
    ]
    assert reward(completions=completions) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert DoubtReward(pay_for="expression", only_intervened=False, first_sentences=4)(
        completions=completions[2:3]
    ) == [1.0]


def test_doubt_only_intervened_rows_and_conversational():
    reward = DoubtReward(pay_for="expression")
    completions = [[{"role": "assistant", "content": "Hmm, no. Let me redo it."}]] * 5
    interventions = ["wrong_step", "none", "", None, "CLEAN"]
    assert reward(completions=completions, intervention=interventions) == [1.0, None, None, None, None]
    assert reward(completions=completions[:1]) == [None]  # no intervention column: cannot tell
    assert reward(completions=[None], intervention=["wrong_step"]) == [None]


def test_doubt_metrics_and_columns():
    metrics, extra = {}, {}
    DoubtReward(pay_for="expression")(
        completions=["Wait.", "So.", "Hmm."],
        intervention=["a", "b", "none"],
        log_metric=lambda k, v: metrics.__setitem__(k, v),
        log_extra=lambda k, v: extra.__setitem__(k, v),
    )
    assert metrics == {
        "doubt_reward/doubt_rate": 0.5,
        "doubt_reward/recovered_doubt_rate": 0.5,  # no gate: every doubt counts
        "doubt_reward/not_intervened": pytest.approx(1 / 3),
        "doubt_reward/not_selected": 0.0,
        "doubt_reward/errors": 0.0,
    }  # counts are logged every call, 0.0 when nothing happened
    assert extra == {"doubt_reward/family": ["wait", None, None]}


def test_doubt_rejects_bad_config():
    with pytest.raises(ValueError):
        DoubtReward(first_sentences=0)
    with pytest.raises(ValueError, match="pay_for must be one of"):
        DoubtReward(pay_for="words")
    with pytest.raises(ValueError, match="categories must be a list"):
        DoubtReward(categories="adversarial")


ANSWERS = dict(answer=["7"] * 4, answer_type=["numeric"] * 4, domain=["math"] * 4)


def test_doubt_pays_only_when_it_leads_to_a_correct_answer():
    completions = [
        "\n\nWait, that step is wrong: 3 + 4 = 7.</think>\\boxed{7}",  # doubt, recovered
        "\n\nWait, that step is wrong: 3 + 4 = 8.</think>\\boxed{8}",  # doubt that leads nowhere
        "\n\nSo 3 + 4 = 7.</think>\\boxed{7}",  # recovered without doubt
        "\n\nWait, 3 + 4 = 7.</think>\\boxed{7}",  # a clean prompt: never taught to doubt
    ]
    metrics = {}
    rewards = DoubtReward(correctness=CorrectnessReward(use_math_verify=False))(
        completions=completions,
        intervention=["wrong_continuation"] * 3 + ["none"],
        log_metric=lambda k, v: metrics.__setitem__(k, v),
        **ANSWERS,
    )
    assert rewards == [1.0, 0.0, 0.0, None]
    assert metrics["doubt_reward/doubt_rate"] == pytest.approx(2 / 3)
    assert metrics["doubt_reward/recovered_doubt_rate"] == pytest.approx(1 / 3)
    assert "correctness_reward/unclosed" not in metrics  # the inner verdicts are taken quietly
    unusable = DoubtReward(correctness=CorrectnessReward(use_math_verify=False))(
        completions=completions[:1], intervention=["x"], answer=["zzz"], answer_type=["multiple_choice"]
    )
    assert unusable == [None]  # no gold: nothing to say about recovery


def test_doubt_restricted_to_categories_and_interventions():
    reward = DoubtReward(pay_for="expression", categories=["neutral", "adversarial"])
    completions = ["Wait, no."] * 4
    categories = ["adversarial", "benign", "neutral", "clean"]
    interventions = ["wrong_continuation", "paraphrase", "wikipedia_text", "none"]
    assert reward(completions=completions, intervention=interventions, category=categories) == [1.0, None, 1.0, None]
    assert reward(completions=completions[:1], intervention=["x"]) == [None]  # no category column: cannot tell
    only = DoubtReward(pay_for="expression", interventions=["wrong_continuation"])
    assert only(completions=completions, intervention=interventions) == [1.0, None, None, None]


def test_prefixing_wait_to_wrong_answers_earns_nothing():
    """A degenerate policy that opens every continuation with "Wait," gains no reward over the same policy
    without it when its answers are wrong, in the combined reward and in the weighted parts TRL sums."""
    rows = 16
    body = [f"\n\nSo {i} + 4 = {i + 5}.</think>\\boxed{{{i + 5}}}" for i in range(rows)]  # all wrong
    columns = dict(
        answer=[str(i + 4) for i in range(rows)],
        answer_type=["numeric"] * rows,
        domain=["math"] * rows,
        reference_length=[100] * rows,
        intervention=["wrong_continuation"] * rows,
    )
    with CorrectnessReward(use_math_verify=False) as correctness:
        combined = RecoveryReward(correctness=correctness)
        parts = [correctness, DoubtReward(correctness=correctness), LengthOverheadReward()]
        weights = [1.0, 0.2, 0.3]

        def mean_reward(completions):
            total = combined(completions=completions, **columns)
            trl = [
                sum(w * (r or 0.0) for w, r in zip(weights, per_row))
                for per_row in zip(*(f(completions=completions, **columns) for f in parts))
            ]
            return sum(total) / rows, sum(trl) / rows

        plain = mean_reward(body)
        waits = mean_reward(["\n\nWait, " + text.lstrip() for text in body])
    assert waits[0] <= plain[0] and waits[1] <= plain[1]
    expression = DoubtReward(pay_for="expression")  # the old reward: gamed
    assert expression(completions=["Wait, " + body[0]], intervention=["x"]) == [1.0]


# -- length --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "length,reference,kwargs,expected",
    [
        (50, 100, {}, 0.0),
        (100, 100, {}, 0.0),
        (125, 100, {}, -0.25),
        (200, 100, {}, -1.0),
        (1000, 100, {}, -1.0),
        (150, 100, {"max_overhead": 0.5}, -1.0),
        (110, 100, {"free_overhead": 0.2}, 0.0),
        (160, 100, {"free_overhead": 0.2, "max_overhead": 1.0}, -0.5),
    ],
)
def test_overhead_penalty(length, reference, kwargs, expected):
    assert overhead_penalty(length, reference, **kwargs) == pytest.approx(expected)


def test_length_in_characters_counts_reasoning_only():
    reward = LengthOverheadReward()
    completions = [
        "a" * 100 + "</think>" + "answer " * 100,  # 100 reasoning chars: at the reference
        "a" * 150 + "</think>5",  # +50 % → -0.5
        "a" * 300,  # never closed: all of it is reasoning → capped at -1
        [{"role": "assistant", "reasoning_content": "a" * 175, "content": "5"}],  # +75 %
    ]
    assert reward(completions=completions, reference_length=[100] * 4) == [0.0, -0.5, -1.0, -0.75]


def test_length_in_tokens_counts_the_reasoning_span_like_reference_tokens(tiny_reasoner):
    """A continuation exactly as long as the remaining original reasoning is at the reference in tokens too:
    its closing tag, answer and EOS are counted on neither side (they were counted against it before)."""
    from recovery.models import get_spec
    from recovery.training_data.render import PromptRenderer

    _, tokenizer = tiny_reasoner
    renderer = PromptRenderer(tokenizer, get_spec("tiny-reasoner"))
    remaining = "\n\nThen 12 + 30 = 42.\n\nSo the total is 42.\n"
    reference_tokens = renderer.count_tokens(remaining)  # how the GRPO prompt set fills reference_tokens
    completion = remaining + "</think>\n\\boxed{42}"
    completion_ids = tokenizer.encode(completion, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert len(completion_ids) > reference_tokens  # the whole completion is longer than the reasoning span
    reward = LengthOverheadReward(
        unit="tokens", max_overhead=0.5, tokenizer=tokenizer, reference_column="reference_tokens"
    )
    assert reward(completions=[completion], completion_ids=[completion_ids], reference_tokens=[reference_tokens]) == [
        0.0
    ]
    longer = remaining * 2 + "</think>\n\\boxed{42}"  # twice the reasoning: +100 %, past max_overhead
    assert reward(completions=[longer], reference_tokens=[reference_tokens]) == [-1.0]


def test_length_in_real_tokens_counts_the_span_the_grpo_builder_counts(shared_data, r1_tokenizer):
    """Under the real R1-distill tokenizer, on a real trace cut after a step's final period: the reward counts
    the continuation's reasoning as ``reference_tokens`` counts the original's remainder (after the same hard
    boundary, so the split ".ĊĊ" costs the same on both sides); the closing tag, answer and EOS on neither."""
    import json

    from recovery.models import get_spec
    from recovery.segment import parse_trace
    from recovery.training_data.render import PromptRenderer

    row = json.loads((shared_data / "real_traces" / "thought_anchors_math_cots.jsonl").read_text().splitlines()[0])
    reasoning = parse_trace(row["problem_id"], "r1", row["solution"]).reasoning
    steps = reasoning.split("\n\n")
    k = next(k for k in range(len(steps) // 2, len(steps)) if steps[k - 1].endswith("."))
    rest = reasoning[len("\n\n".join(steps[:k])) :]
    renderer = PromptRenderer(r1_tokenizer, get_spec("DeepSeek-R1-Distill-Qwen-7B"))
    reference_tokens = renderer.count_tokens(rest)  # how the GRPO prompt set fills reference_tokens
    assert r1_tokenizer.convert_ids_to_tokens(r1_tokenizer.encode(rest, add_special_tokens=False))[0] == "ĊĊ"
    answer = "</think>\n\n\\boxed{" + row["gt_answer"] + "}"
    completion_ids = r1_tokenizer.encode(rest + answer, add_special_tokens=False) + [r1_tokenizer.eos_token_id]
    reward = LengthOverheadReward(
        unit="tokens", max_overhead=1.0, tokenizer=r1_tokenizer, reference_column="reference_tokens"
    )
    assert reward(
        completions=[rest + answer], completion_ids=[completion_ids], reference_tokens=[reference_tokens]
    ) == [0.0]
    longer = rest + rest[: len(rest) // 2]
    expected = overhead_penalty(len(r1_tokenizer.encode(longer, add_special_tokens=False)), reference_tokens)
    assert -1.0 < expected < 0.0
    assert reward(completions=[longer + answer], reference_tokens=[reference_tokens]) == [expected]


def test_length_in_tokens_needs_the_tokenizer():
    with pytest.raises(ValueError, match="tokenizer"):
        LengthOverheadReward(unit="tokens")


@pytest.mark.parametrize("reference", [None, 0, -5, float("nan"), float("inf"), "abc", True, 1e-308, 0.5, 10**400])
def test_length_without_a_usable_reference_is_none(reference):
    assert LengthOverheadReward()(completions=["abc"], reference_length=[reference]) == [None]


def test_overhead_is_finite_for_any_usable_reference():
    reward = LengthOverheadReward()
    for reference in (1, 1.0, 1e300):
        logged: dict = {}
        out = reward(
            completions=["a" * 500 + "</think>5"],
            reference_length=[reference],
            log_extra=logged.__setitem__,
        )
        assert out[0] is not None and -1.0 <= out[0] <= 0.0
        assert math.isfinite(logged["length_overhead_reward/overhead_pct"][0])


def test_length_missing_column_and_metrics(caplog):
    assert LengthOverheadReward()(completions=["abc"]) == [None]
    assert "reference_length" in caplog.text
    metrics, extra = {}, {}
    LengthOverheadReward()(
        completions=["a" * 150, "b"],
        reference_length=[100, None],
        log_metric=lambda k, v: metrics.__setitem__(k, v),
        log_extra=lambda k, v: extra.__setitem__(k, v),
    )
    assert metrics == {
        "length_overhead_reward/overhead_pct": 50.0,
        "length_overhead_reward/no_reference": 0.5,
        "length_overhead_reward/errors": 0.0,
    }
    assert extra == {"length_overhead_reward/overhead_pct": [50.0, None]}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"unit": "words"},
        {"max_overhead": 0},
        {"max_overhead": -1},
        {"free_overhead": 1.0, "max_overhead": 0.5},
        {"max_overhead": float("inf")},
    ],
)
def test_length_rejects_bad_config(kwargs):
    with pytest.raises(ValueError):
        LengthOverheadReward(**kwargs)
