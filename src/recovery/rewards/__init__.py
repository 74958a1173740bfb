"""GRPO reward functions for recovery training, following TRL's reward-function contract.

TRL (from 1.0, the declared floor) calls every reward function as ``f(prompts=..., completions=..., completion_ids=..., **columns)``
with each dataset column (but ``prompt``/``completion``/``completion_ids``) as a keyword argument, plus
``trainer_state``, ``log_extra`` and ``log_metric`` (see `recovery.rewards.base`). Each reward here is a
picklable callable class with a ``__name__`` that returns one float or None ("cannot score") per
completion, never raises, never evaluates model text, and bounds its time per item.

* `CorrectnessReward` — 1.0 correct; 0.0 wrong, no final answer, never closed, timed out; None when
  the gold is unusable. Columns: ``answer``, ``answer_type``, ``domain`` (optional ``source``,
  ``rel_tol``, ``abs_tol``, ``question``).
* `DoubtReward` — 1.0 when a doubt expression opens the continuation (first 3 sentences) and the
  continuation ends correct (doubt that supports recovery), else 0.0; None for clean rows. Columns:
  ``intervention`` (and ``category`` when restricted to categories), plus the correctness columns.
* `LengthOverheadReward` — 0.0 up to the reference length, down to -1.0 at +100 %; None without a
  reference. Column: ``reference_length`` (characters of the remaining original reasoning, or tokens).
* `RecoveryReward` — ``1.0·correctness + 0.2·doubt + 0.3·length`` (length only on correct answers),
  correctness dominant; or pass the three separately with ``GRPOConfig.reward_weights``.

Recipes name them by the short names of `REWARDS` (`recovery.rewards.registry`, where a new reward is one
entry) and pass options under ``reward_options``; `build_reward` builds one from its name and options.

>>> from recovery.rewards import CorrectnessReward, DoubtReward, LengthOverheadReward, RecoveryReward
>>> funcs = [CorrectnessReward(), DoubtReward(), LengthOverheadReward()]
>>> [f.__name__ for f in funcs]  # GRPOTrainer(reward_funcs=funcs, args=GRPOConfig(reward_weights=[1, 0.2, 0.3]))
['correctness_reward', 'doubt_reward', 'length_overhead_reward']
"""

from recovery.rewards.base import RewardFunction, completion_text
from recovery.rewards.combined import RecoveryReward, RewardParts
from recovery.rewards.correctness import VERDICT_REWARD, CorrectnessReward, unusable_gold
from recovery.rewards.doubt import CLEAN_INTERVENTIONS, DoubtReward
from recovery.rewards.length import LengthOverheadReward, overhead_penalty
from recovery.rewards.registry import REWARDS, RewardSpec, build_reward, reward_class, reward_spec

__all__ = [
    "CLEAN_INTERVENTIONS",
    "REWARDS",
    "VERDICT_REWARD",
    "CorrectnessReward",
    "DoubtReward",
    "LengthOverheadReward",
    "RecoveryReward",
    "RewardFunction",
    "RewardParts",
    "RewardSpec",
    "build_reward",
    "completion_text",
    "overhead_penalty",
    "reward_class",
    "reward_spec",
    "unusable_gold",
]
