"""GRPO reward functions for recovery training, following TRL's reward-function contract.

TRL 1.16 calls every reward function as ``f(prompts=..., completions=..., completion_ids=..., **columns)``
with each dataset column (but ``prompt``/``completion``/``completion_ids``) as a keyword argument, plus
``trainer_state``, ``log_extra`` and ``log_metric`` (see `recovery.rewards.base`). Each reward here is a
picklable callable class with a ``__name__`` that returns one float or None ("cannot score") per
completion, never raises, never evaluates model text, and bounds its time per item.

* `CorrectnessReward` — 1.0 correct; 0.0 wrong, no final answer, never closed, timed out; None when
  the gold is unusable. Columns: ``answer``, ``answer_type``, ``domain`` (optional ``source``,
  ``rel_tol``, ``abs_tol``, ``question``).
* `DoubtReward` — 1.0 when a doubt expression opens the continuation (first 3 sentences), else 0.0;
  None for clean rows with ``only_intervened=True``. Column: ``intervention`` (optional).
* `LengthOverheadReward` — 0.0 up to the reference length, down to -1.0 at +100 %; None without a
  reference. Column: ``reference_length`` (characters of the remaining original reasoning, or tokens).
* `RecoveryReward` — ``1.0·correctness + 0.2·doubt + 0.3·length`` (length only on correct answers),
  correctness dominant; or pass the three separately with ``GRPOConfig.reward_weights``.

>>> from recovery.rewards import CorrectnessReward, DoubtReward, LengthOverheadReward, RecoveryReward
>>> funcs = [CorrectnessReward(), DoubtReward(only_intervened=True), LengthOverheadReward()]
>>> [f.__name__ for f in funcs]  # GRPOTrainer(reward_funcs=funcs, args=GRPOConfig(reward_weights=[1, 0.2, 0.3]))
['correctness_reward', 'doubt_reward', 'length_overhead_reward']
"""

from recovery.rewards.base import RewardFunction, completion_text
from recovery.rewards.combined import RecoveryReward
from recovery.rewards.correctness import VERDICT_REWARD, CorrectnessReward
from recovery.rewards.doubt import CLEAN_INTERVENTIONS, DoubtReward
from recovery.rewards.length import LengthOverheadReward, overhead_penalty

#: Reward classes by short name (for configs: ``reward_funcs: [correctness, doubt, length]``).
REWARDS: dict[str, type[RewardFunction]] = {
    "correctness": CorrectnessReward,
    "doubt": DoubtReward,
    "length": LengthOverheadReward,
    "recovery": RecoveryReward,
}


def make_reward(name: str, **options) -> RewardFunction:
    """A reward by its short name (`REWARDS`) or its ``__name__``, built with ``options``.

    >>> make_reward("length_overhead_reward", max_overhead=0.5).max_overhead
    0.5
    """
    by_name: dict[str, type[RewardFunction]] = dict(REWARDS)
    for cls in REWARDS.values():
        by_name[cls.__dict__["__name__"]] = cls  # the reward's name, e.g. "correctness_reward"
        by_name[cls.__qualname__] = cls  # the class name, e.g. "CorrectnessReward"
    try:
        cls = by_name[name]
    except KeyError:
        raise ValueError(f"unknown reward {name!r}; choose from {sorted(REWARDS)}") from None
    return cls(**options)


__all__ = [
    "CLEAN_INTERVENTIONS",
    "REWARDS",
    "VERDICT_REWARD",
    "CorrectnessReward",
    "DoubtReward",
    "LengthOverheadReward",
    "RecoveryReward",
    "RewardFunction",
    "completion_text",
    "make_reward",
    "overhead_penalty",
]
