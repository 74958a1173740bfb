"""One reward for recovery training: correctness first, a little doubt, a length-overhead penalty."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recovery.rewards.base import RewardFunction, Scored, check_weight
from recovery.rewards.correctness import CorrectnessReward
from recovery.rewards.doubt import DoubtReward
from recovery.rewards.length import LengthOverheadReward

__all__ = ["RecoveryReward", "RewardParts"]


@dataclass(frozen=True, slots=True)
class RewardParts:
    """One completion's `RecoveryReward` and the parts it was made of, as each part reward returned them.

    ``score`` is what `RecoveryReward` returns for the row (None: cannot score); ``correctness``, ``doubt``
    and ``length`` are the part rewards (None where that part has nothing to say: a clean row's doubt, a row
    without a reference length); ``verdict`` is the correctness reward's verdict (``correct``, ``wrong``,
    ``no_answer``, ``timeout``, ``error``, ``unparsable_gold``, ``no_completion``; None when the row failed or
    the correctness reward was built with ``log_columns=False``).
    Frameworks that want one number per part (verl's ``reward_extra_info``, OpenRLHF's ``extra_logs``) read
    them from here, so they log exactly the values the TRL rewards computed.
    """

    score: float | None
    correctness: float | None
    doubt: float | None
    length: float | None
    verdict: str | None

    @property
    def scorable(self) -> bool:
        return self.score is not None


class RecoveryReward(RewardFunction):
    r"""``w_c·correctness + w_d·doubt + w_l·length`` as a single TRL reward function.

    * correctness (`CorrectnessReward`): 1 / 0; None (gold unusable) makes the whole reward None;
    * doubt (`DoubtReward`): 1 when the continuation doubts right after the intervention *and* ends
      correct, else 0; clean rows are None (never pushed to doubt sound reasoning) and count as 0. The
      correctness verdicts computed here are the ones it gates on, so nothing is graded twice;
    * length (`LengthOverheadReward`): 0 … -1; None (no reference) counts as 0. With
      ``length_when_correct=True`` (default) the penalty applies to correct answers only: among wrong
      answers a shorter one is not better, and penalising them would teach the model to give up early —
      the paper ties shortened, less doubtful traces to lower accuracy (§4.2–4.3).

    Correctness must dominate: the constructor requires ``w_c > w_d + w_l``, so every correct
    completion scores above every wrong one whatever its doubt and length. Defaults: 1.0, 0.2, 0.3, and
    why: correctness is the outcome the benchmark measures; doubt (0.2) is a bonus among *correct*
    continuations for the behaviour the paper finds supports recovery (doubt right after the intervention),
    small enough that a correct answer without doubt (1.0) still beats nothing and never ties a wrong one;
    length (0.3) penalises overhead only on correct answers (at most -0.3 at +100 % over the original), so a
    correct, doubting, long continuation (1.0 + 0.2 - 0.3 = 0.9) stays above every wrong one (0). A policy
    that writes "Wait," before a wrong answer gains nothing (`DoubtReward`'s default ``pay_for``).

    Two ways to use the parts with TRL (``GRPOConfig.reward_weights`` takes one weight per function)::

        # one function, with the gating above
        GRPOTrainer(..., reward_funcs=[RecoveryReward()])
        # three functions, weighted by TRL (nansum of weight·reward; no gating; each logged
        # as rewards/<name>/mean, and multi_objective_aggregation applies)
        GRPOTrainer(..., reward_funcs=[CorrectnessReward(), DoubtReward(only_intervened=True),
                                       LengthOverheadReward()],
                     args=GRPOConfig(..., reward_weights=[1.0, 0.2, 0.3]))

    The parts log their own metrics and table columns when TRL passes ``log_metric``/``log_extra``;
    this one adds ``recovery_reward/unscorable`` (fraction of None).

    >>> reward = RecoveryReward()
    >>> reward(
    ...     completions=["\n\nWait, that is wrong.</think>\\boxed{7}", "\n\nSo." + "y" * 145 + "</think>\\boxed{7}",
    ...                  "\n\nWait, no." + "x" * 300 + "</think>\\boxed{8}"],
    ...     answer=["7"] * 3, answer_type=["numeric"] * 3, domain=["math"] * 3, reference_length=[100] * 3,
    ...     intervention=["wrong_step"] * 3,
    ... )
    [1.2, 0.85, 0.0]
    """

    __name__ = "recovery_reward"
    count_metrics = ("unscorable",)

    def __init__(
        self,
        correctness: CorrectnessReward | None = None,
        doubt: DoubtReward | None = None,
        length: LengthOverheadReward | None = None,
        *,
        correctness_weight: float = 1.0,
        doubt_weight: float = 0.2,
        length_weight: float = 0.3,
        length_when_correct: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name, log_columns=False)
        check_weight("correctness_weight", correctness_weight)
        check_weight("doubt_weight", doubt_weight)
        check_weight("length_weight", length_weight)
        if not correctness_weight > doubt_weight + length_weight:
            raise ValueError(
                f"correctness must dominate: need correctness_weight ({correctness_weight}) > doubt_weight "
                f"({doubt_weight}) + length_weight ({length_weight}), or a wrong answer could outscore a right one"
            )
        self.correctness = correctness if correctness is not None else CorrectnessReward()
        self.doubt = doubt if doubt is not None else DoubtReward(correctness=self.correctness)
        self.length = length if length is not None else LengthOverheadReward()
        self.correctness_weight = float(correctness_weight)
        self.doubt_weight = float(doubt_weight)
        self.length_weight = float(length_weight)
        self.length_when_correct = bool(length_when_correct)

    def close(self) -> None:
        """Stop the correctness reward's math-verify workers."""
        self.correctness.close()

    def batch_rewards(self, prompts: Any, completions: Any, completion_ids: Any, kwargs: dict[str, Any]) -> list:
        call = dict(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        return self._compute(call, kwargs)[0]

    def parts(
        self,
        prompts: Any = None,
        completions: Any = None,
        completion_ids: Any = None,
        **kwargs: Any,
    ) -> list[RewardParts]:
        r"""The reward of every completion with its parts (`RewardParts`), from the very computation `__call__`
        does (same arguments, same values); never raises.

        >>> [p.score for p in RecoveryReward().parts(completions=["</think>\\boxed{7}"], answer=["7"],
        ...     answer_type=["numeric"], domain=["m"], intervention=["none"], reference_length=[None])]
        [1.0]
        """
        verdicts: list[Any] = []
        forward = kwargs.get("log_extra")
        column = f"{self.correctness.__name__}/verdict"

        def log_extra(name: str, values: list) -> None:
            if name == column:
                verdicts[:] = values
            if callable(forward):
                forward(name, values)

        call = dict(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        call["log_extra"] = log_extra
        scores, correct, doubt, length = self._compute(call, kwargs)
        n = len(scores)
        verdicts = verdicts if len(verdicts) == n else [None] * n
        return [
            RewardParts(
                score=scores[i],
                correctness=correct[i],
                doubt=doubt[i] if doubt is not None else None,
                length=length[i] if length is not None else None,
                verdict=verdicts[i],
            )
            for i in range(n)
        ]

    def _compute(self, call: dict[str, Any], kwargs: dict[str, Any]) -> tuple[list, list, list | None, list | None]:
        """(rewards, correctness, doubt or None, length or None): each part once, then the weighted sum."""
        correct = self.correctness(**call)  # the parts never raise and return one value per completion
        doubt = None
        if self.doubt_weight > 0:  # the doubt reward gates on these verdicts instead of grading again
            doubt = self.doubt.given_correctness(correct if self.doubt.pay_for == "recovery" else None, **call)
        length = self.length(**call) if self.length_weight > 0 else None
        combine: Callable[[], Scored] = lambda: self._combine(correct, doubt, length)
        return self._guarded(len(correct), kwargs, combine), correct, doubt, length

    def _combine(self, correct: list, doubt: list | None, length: list | None) -> Scored:
        n = len(correct)
        scored = Scored([], n=n)
        for i, c in enumerate(correct):
            if c is None:
                scored.counts["unscorable"] += 1
                scored.rewards.append(None)
                continue
            total = self.correctness_weight * c
            if doubt is not None and doubt[i] is not None:
                total += self.doubt_weight * doubt[i]
            if length is not None and length[i] is not None and (c > 0 or not self.length_when_correct):
                total += self.length_weight * length[i]
            scored.rewards.append(round(total, 10))
        return scored
