"""recovery.rewards.base: completion text in every shape TRL produces, columns, logging, never raising."""

from __future__ import annotations

import numpy as np
import pytest

from recovery.rewards import DoubtReward, LengthOverheadReward, completion_text
from recovery.rewards.base import RewardFunction, Row, Scored


@pytest.mark.parametrize(
    "completion,expected",
    [
        ("plain text", "plain text"),
        (b"caf\xc3\xa9 \xff", "café \ufffd"),
        ([{"role": "assistant", "content": "a"}], "a"),
        ({"role": "assistant", "content": "a"}, "a"),
        ([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"text": "b"}]}], "ab"),
        ([{"role": "assistant", "reasoning_content": "r", "content": "a"}], "r</think>a"),
        ([{"role": "assistant", "thinking": "r", "content": "a"}], "r</think>a"),
        ([{"role": "assistant", "reasoning_content": None, "content": "a"}], "</think>a"),  # empty think block
        ([{"role": "tool", "content": "x"}, {"role": "assistant", "content": "a"}], "a"),
        ([{"role": "assistant", "content": None}], ""),
        ([], None),
        (None, None),
        (42, None),
        ([[1, 2]], None),
    ],
)
def test_completion_text(completion, expected):
    assert completion_text(completion) == expected


def test_columns_may_be_scalars_or_arrays():
    reward = LengthOverheadReward()
    assert reward(completions=["a" * 150, "a" * 100], reference_length=100) == [-0.5, 0.0]  # broadcast scalar
    assert reward(completions=["a" * 150, "a" * 100], reference_length=np.array([100, 50])) == [-0.5, -1.0]


class Exploding(RewardFunction):
    __name__ = "exploding"
    count_metrics = ("custom",)

    def _score_row(self, row: Row, scored: Scored) -> float | None:
        if row.completion == "boom":
            raise RuntimeError("boom")
        if row.completion == "nan":
            return float("nan")
        return 1.0


def test_a_reward_without_its_hook_scores_none_and_says_which_hook(caplog):
    class Unfinished(RewardFunction):
        __name__ = "unfinished"

    assert Unfinished()(completions=["a", "b"]) == [None, None]
    assert "Unfinished overrides neither _score_row (per row) nor _score (per batch)" in caplog.text


def test_failures_become_none_and_are_counted(caplog):
    metrics = {}
    out = Exploding()(completions=["ok", "boom", "nan", "boom"], log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert out == [1.0, None, None, None]
    assert metrics == {"exploding/errors": 0.75, "exploding/custom": 0.0}
    assert caplog.text.count("a row failed") == 1  # warned once per kind, not per row


def test_a_broken_batch_scores_none_and_still_logs_columns():
    class BrokenBatch(RewardFunction):
        __name__ = "broken"
        extra_columns = ("why",)

        def _score(self, rows):
            raise RuntimeError("whole batch")

    extra = {}
    out = BrokenBatch()(completions=["a", "b"], log_extra=lambda k, v: extra.__setitem__(k, v))
    assert out == [None, None] and extra == {"broken/why": [None, None]}


def test_name_override_and_repr():
    reward = DoubtReward(name="doubt_first_5", first_sentences=5)
    assert reward.__name__ == "doubt_first_5" and "doubt_first_5" in repr(reward)
    assert DoubtReward().__name__ == "doubt_reward"
    with pytest.raises(ValueError):
        DoubtReward(name="")
