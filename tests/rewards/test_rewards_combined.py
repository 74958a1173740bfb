"""RecoveryReward: the weighted combination, correctness dominant, length gated on correct answers."""

from __future__ import annotations

import itertools

import pytest

from recovery.rewards import (
    REWARDS,
    CorrectnessReward,
    DoubtReward,
    LengthOverheadReward,
    RecoveryReward,
    reward_class,
)

COLUMNS = dict(
    answer=["7"] * 4,
    answer_type=["numeric"] * 4,
    domain=["math"] * 4,
    reference_length=[100] * 4,
    intervention=["wrong_step"] * 4,
)


def test_hand_computed_combination():
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False))
    completions = [
        "\n\nWait, no. 3 + 4 = 7.</think>\\boxed{7}",  # correct + doubt, short: 1 + 0.2
        "\n\nSo 3 + 4 = 7." + "y" * 135 + "</think>\\boxed{7}",  # correct, 150 chars (+50 %): 1 - 0.3·0.5
        "\n\nWait, no." + "x" * 300 + "</think>\\boxed{8}",  # wrong + doubt: doubt that leads nowhere earns 0
        "\n\nSo 3 + 4 = 8.",  # never closed: 0
    ]
    assert reward(completions=completions, **COLUMNS) == pytest.approx([1.2, 0.85, 0.0, 0.0])
    ungated = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False), length_when_correct=False)
    assert ungated(completions=completions[2:3], **{k: v[:1] for k, v in COLUMNS.items()}) == pytest.approx([-0.3])
    expression = RecoveryReward(
        correctness=CorrectnessReward(use_math_verify=False), doubt=DoubtReward(pay_for="expression")
    )
    assert expression(completions=completions, **COLUMNS) == pytest.approx([1.2, 0.85, 0.2, 0.0])  # the old rule


def test_none_rules():
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False))
    cols = dict(
        COLUMNS,
        answer=["7", "zzz"],
        answer_type=["numeric", "multiple_choice"],
        reference_length=[None, 100],
        intervention=["none", "wrong_step"],
        domain=["m", "m"],
    )
    # clean row: doubt None → 0; no reference → 0; unusable gold → the whole reward is None
    assert reward(completions=["Wait.</think>\\boxed{7}", "</think>(A)"], **cols) == [1.0, None]


def test_correctness_always_dominates():
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False))
    texts = {
        "doubt": "Wait, no. ",
        "plain": "So. ",
    }
    scores = {}
    for (kind, prefix), pad, answer in itertools.product(texts.items(), (0, 500), ("7", "8")):
        text = prefix + "z" * pad + "</think>\\boxed{" + answer + "}"
        scores[(kind, pad, answer)] = reward(completions=[text], **{k: v[:1] for k, v in COLUMNS.items()})[0]
    worst_correct = min(v for k, v in scores.items() if k[2] == "7")
    best_wrong = max(v for k, v in scores.items() if k[2] == "8")
    assert worst_correct > best_wrong


@pytest.mark.parametrize("weights", [(1.0, 0.5, 0.5), (0.4, 0.2, 0.3), (1.0, -0.1, 0.1), (1.0, 0.1, float("nan"))])
def test_weights_must_keep_correctness_dominant(weights):
    correctness, doubt, length = weights
    with pytest.raises(ValueError):
        RecoveryReward(correctness_weight=correctness, doubt_weight=doubt, length_weight=length)


def test_zero_weight_parts_are_skipped():
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False), doubt_weight=0, length_weight=0)
    assert reward(completions=["Wait.</think>\\boxed{7}"], answer=["7"], answer_type=["numeric"]) == [1.0]


def test_parts_log_under_their_own_names():
    metrics = {}
    reward = RecoveryReward(correctness=CorrectnessReward(use_math_verify=False))
    reward(
        completions=["</think>\\boxed{7}", "x"],
        answer=["7", "nope"],
        answer_type=["numeric", "multiple_choice"],
        reference_length=[10, 10],
        intervention=["a", "b"],
        log_metric=lambda k, v: metrics.__setitem__(k, v),
    )
    assert metrics["recovery_reward/unscorable"] == 0.5
    assert metrics["correctness_reward/unparsable_gold"] == 0.5
    assert "doubt_reward/doubt_rate" in metrics and "length_overhead_reward/overhead_pct" in metrics


def test_registry_and_names():
    assert set(REWARDS) == {"correctness", "doubt", "length", "recovery"}
    assert isinstance(reward_class("doubt")(only_intervened=True), DoubtReward)
    assert isinstance(reward_class("length_overhead_reward")(), LengthOverheadReward)
    assert isinstance(reward_class("RecoveryReward")(), RecoveryReward)
    with pytest.raises(ValueError):
        reward_class("nope")
    assert CorrectnessReward(name="acc_strict").__name__ == "acc_strict"
    assert [r.__name__ for r in (CorrectnessReward(), DoubtReward(), LengthOverheadReward(), RecoveryReward())] == [
        "correctness_reward",
        "doubt_reward",
        "length_overhead_reward",
        "recovery_reward",
    ]


@pytest.mark.parametrize("module", ["__init__", "base", "correctness", "doubt", "length", "combined", "registry"])
def test_docstring_examples(module):
    import doctest
    import importlib

    mod = importlib.import_module("recovery.rewards" if module == "__init__" else f"recovery.rewards.{module}")
    result = doctest.testmod(mod)
    assert result.failed == 0
    if module != "__init__":
        assert result.attempted > 0
