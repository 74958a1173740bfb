"""What every integration shares: the reward's settings, the columns a row carries, one process-wide reward per
setting, and the one policy for a row the reward cannot score.

Every framework (verl, OpenRLHF, the reward server) scores through `score_rows`, which calls
`recovery.rewards.RecoveryReward.parts` — the very computation TRL's ``GRPOTrainer`` runs when it calls the
reward — on the completions with the columns of the exported rows (`REWARD_COLUMNS`). The values are
therefore the TRL reward's, row for row; only the way they are handed back differs (`scores_dict`).

Rows the reward cannot score (its ``None``: a gold answer that cannot be parsed, a missing ``answer_type``, a
row that failed) are rare in an export — the exporters drop rows whose gold cannot be used, counted — and
where one reaches a trainer, the policy is explicit (`RewardSettings.unscorable`), never a silent 0.0:

* ``"neutral"`` (default): the row scores ``neutral_score`` (0.0), ``scorable`` is 0.0 beside it (verl logs
  it from ``reward_extra_info``, OpenRLHF from ``extra_logs``: the rate of unscorable rows is a curve) and a
  warning names the reason once. Every completion of a prompt shares its gold, so all of them score the
  same constant: under group-relative advantages (GRPO, RLOO, GRPO-style REINFORCE++) that prompt adds
  nothing, which is what TRL does with a row all of whose rewards are None.
* ``"raise"``: `UnscorableRow` naming the row and the reason: the trainer stops. For critic-based PPO, where
  a constant still moves the value function, or to validate a dataset.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from recovery.rewards import CorrectnessReward, RecoveryReward, RewardParts
from recovery.rewards.registry import build_reward

__all__ = [
    "PARTS",
    "REWARD_COLUMNS",
    "UNSCORABLE_POLICIES",
    "RewardSettings",
    "UnscorableRow",
    "filter_score",
    "scores_dict",
    "score_rows",
    "shared_reward",
    "unscorable_reason",
]

log = logging.getLogger(__name__)

#: The row columns the rewards read (`recovery.rewards`): the correctness reward's gold and how it is compared,
#: the doubt reward's intervention, the length reward's reference. Exports put them where each framework hands
#: them to the reward (verl: ``reward_model.ground_truth`` + ``extra_info``; OpenRLHF: the label).
REWARD_COLUMNS: tuple[str, ...] = (
    "answer",
    "answer_type",
    "domain",
    "source",
    "question",
    "rel_tol",
    "abs_tol",
    "intervention",
    "category",
    "reference_length",
)
#: The parts reported beside the score, in this order, as numbers.
PARTS: tuple[str, ...] = ("correctness", "doubt", "length", "scorable")
UNSCORABLE_POLICIES: tuple[str, ...] = ("neutral", "raise")


class UnscorableRow(ValueError):
    """A row the reward cannot score, under ``unscorable="raise"``."""


@dataclass(frozen=True)
class RewardSettings:
    """How the integrations score: which reward of the registry (`recovery.rewards.registry.REWARDS`, by name,
    with its ``reward_options`` as a recipe's ``reward_options.<name>`` gives them), `RecoveryReward`'s weights
    and its correctness reward's ``unclosed`` policy (the default reward, ``recovery``), the unscorable-row
    policy (module doc), and the math-verify workers of each scoring process.

    >>> RewardSettings.from_kwargs({"doubt_weight": 0.1, "num_turns": 2})[0].doubt_weight
    0.1
    """

    correctness_weight: float = 1.0
    doubt_weight: float = 0.2
    length_weight: float = 0.3
    unclosed: str = "no_answer"
    unscorable: str = "neutral"
    neutral_score: float = 0.0
    grader_workers: int = 1
    grader_timeout_s: float = 1.0
    reward: str = "recovery"
    #: The policy's closing think tag (``</thought>`` for EXAONE-Deep): only it ends a completion's reasoning.
    think_close: str = "</think>"
    #: The reward's options as canonical JSON (a mapping given here is stored so: the settings stay hashable).
    reward_options: str = "{}"

    def __post_init__(self) -> None:
        options = self.reward_options
        if isinstance(options, str):
            try:
                options = json.loads(options)
            except ValueError as err:
                raise ValueError(f"reward_options is not a JSON object: {err}") from None
        if not isinstance(options, Mapping):
            raise ValueError(f"reward_options must be a mapping of the reward's options, got {options!r}")
        plain = _plain(options)  # a framework's config mapping (omegaconf's DictConfig) as JSON's types
        object.__setattr__(self, "reward_options", json.dumps(plain, sort_keys=True, ensure_ascii=False))
        if self.reward != "recovery":
            changed = [f.name for f in fields(self) if f.name in _RECOVERY_ONLY and getattr(self, f.name) != f.default]
            if changed:
                raise ValueError(
                    f"{', '.join(changed)} set(s) the 'recovery' reward; give reward {self.reward!r} its options "
                    "in reward_options"
                )
        if self.unscorable not in UNSCORABLE_POLICIES:
            raise ValueError(f"unscorable must be one of {', '.join(UNSCORABLE_POLICIES)}, got {self.unscorable!r}")
        if isinstance(self.neutral_score, bool) or not math.isfinite(float(self.neutral_score)):
            raise ValueError(f"neutral_score must be a finite number, got {self.neutral_score!r}")
        self.build()  # the reward's own checks (weights, unclosed) run now, not at the first row

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> tuple[RewardSettings, list[str]]:
        """The settings named in ``kwargs`` (a framework's reward kwargs) and the names it did not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in kwargs.items() if k in known}), sorted(set(kwargs) - known)

    def build(self) -> Any:
        """A new reward with these settings (it starts no worker until it grades): `RecoveryReward` by default,
        else the registry's reward ``reward`` built with ``reward_options`` (`build_reward`)."""
        options = json.loads(self.reward_options)
        if self.reward != "recovery":
            return build_reward(self.reward, options, think_close=self.think_close)
        if options or self.think_close != "</think>":
            # The recovery reward with options of its parts, or every part reading the policy's closing tag: the
            # registry's rule, these settings first.
            grader = {"unclosed": self.unclosed, "workers": self.grader_workers, "timeout_s": self.grader_timeout_s}
            options["correctness"] = {**grader, **(options.get("correctness") or {})}
            for name in ("correctness_weight", "doubt_weight", "length_weight"):
                if "weights" not in options:
                    options.setdefault(name, getattr(self, name))
            return build_reward("recovery", options, think_close=self.think_close)
        return RecoveryReward(
            CorrectnessReward(unclosed=self.unclosed, workers=self.grader_workers, timeout_s=self.grader_timeout_s),
            correctness_weight=self.correctness_weight,
            doubt_weight=self.doubt_weight,
            length_weight=self.length_weight,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


#: The fields that configure the default reward (``recovery``) only.
_RECOVERY_ONLY = ("correctness_weight", "doubt_weight", "length_weight", "unclosed")

_SHARED: dict[tuple[int, RewardSettings], Any] = {}
_SHARED_LOCK = threading.Lock()
_WARNED: set[str] = set()


def shared_reward(settings: RewardSettings) -> Any:
    """This process's reward for ``settings``, built once (its math-verify workers are started once, on first
    need, and stop with the process). A forked child builds its own."""
    key = (os.getpid(), settings)
    with _SHARED_LOCK:
        reward = _SHARED.get(key)
        if reward is None:
            reward = _SHARED[key] = settings.build()
    return reward


def score_rows(reward: Any, completions: Sequence[Any], rows: Sequence[Mapping[str, Any]]) -> list[RewardParts]:
    """`RecoveryReward.parts` of each completion with its row's `REWARD_COLUMNS` (a column no row has is not
    passed at all, as TRL passes only the dataset's columns); never raises. A reward without parts (another
    reward of the registry) is called as TRL calls it: its value is the score, the parts are None."""
    if len(completions) != len(rows):
        raise ValueError(f"{len(completions)} completions for {len(rows)} rows")
    columns = {c: [row.get(c) for row in rows] for c in REWARD_COLUMNS if any(c in row for row in rows)}
    if hasattr(reward, "parts"):
        return reward.parts(completions=list(completions), **columns)
    values = reward(completions=list(completions), **columns)
    return [RewardParts(score=v, correctness=None, doubt=None, length=None, verdict=None) for v in values]


def unscorable_reason(part: RewardParts) -> str:
    """Why a row scored None, in a few words."""
    if part.verdict in (None, ""):
        return "the reward gave no score for this row"
    if part.verdict == "unparsable_gold":
        return "the gold answer cannot be used (unparsable, or no answer_type)"
    return f"no score ({part.verdict})"


def scores_dict(part: RewardParts, settings: RewardSettings, *, row: Any = None) -> dict[str, float]:
    """``{"score", "correctness", "doubt", "length", "scorable"}``, all floats, for a framework that wants one
    number per part. A part with nothing to say (a clean row's doubt, no reference length) is 0.0, as it
    counts in the score; an unscorable row follows ``settings.unscorable`` (module doc)."""
    score = part.score
    if score is None:
        reason = unscorable_reason(part)
        if settings.unscorable == "raise":
            raise UnscorableRow(f"row {row!r}: {reason} (unscorable='raise')")
        if reason not in _WARNED:
            _WARNED.add(reason)
            log.warning(
                "rows that cannot be scored (%s) get neutral_score=%s and scorable=0 (logged once per reason)",
                reason,
                settings.neutral_score,
            )
        score = settings.neutral_score
    return {
        "score": float(score),
        "correctness": float(part.correctness or 0.0),
        "doubt": float(part.doubt or 0.0),
        "length": float(part.length or 0.0),
        "scorable": 1.0 if part.scorable else 0.0,
    }


def filter_score(numbers: Mapping[str, float], part_correctness: Any) -> float:
    """The 0-1 score a trainer filters prompts on (OpenRLHF's ``scores``): the correctness part, or the score
    itself for a reward without one."""
    return float(numbers["correctness"] if part_correctness is not None else numbers["score"])
