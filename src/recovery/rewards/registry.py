"""The rewards a GRPO recipe can name (``reward_funcs``), and how each is built from the recipe's options.

`REWARDS` maps a short name to a `RewardSpec`. A new reward is its class (or function) plus one entry::

    REWARDS["brevity"] = RewardSpec(BrevityReward)

and a recipe then names it, with its options (the class's keyword arguments) under ``reward_options``::

    reward_funcs: [correctness, brevity]
    reward_options: {brevity: {max_chars: 400}}

`build_reward` is the one rule: a class is called with its options, plus the policy's ``think_close`` and
``tokenizer`` when its constructor takes them and the options do not set them; a function following TRL's
reward contract is the reward itself and takes no options. The built-ins assembled from parts (the doubt
reward's own correctness verdicts, the combined reward's three parts) give their spec a ``build`` that does
it, with each part's options as a nested mapping. An unknown name, or an option the reward does not take,
is a `ValueError` naming the known ones.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from recovery.registry import Registry
from recovery.rewards.combined import RecoveryReward
from recovery.rewards.correctness import CorrectnessReward
from recovery.rewards.doubt import DoubtReward
from recovery.rewards.length import LengthOverheadReward

__all__ = ["REWARDS", "RewardSpec", "build_reward", "reward_class", "reward_spec"]


@dataclass(frozen=True)
class RewardSpec:
    """A reward recipes can name: ``target`` is its class (built with the recipe's options) or a function
    following TRL's reward contract (used as it is). ``build(options, think_close=..., tokenizer=...)``, when
    set, builds it instead: for a reward assembled from parts whose options nest."""

    target: Callable[..., Any]
    build: Callable[..., Any] | None = None

    def create(self, options: Mapping[str, Any], *, think_close: str = "</think>", tokenizer: Any = None) -> Any:
        """The reward callable for ``options`` (see `build_reward`)."""
        if self.build is not None:
            return self.build(dict(options), think_close=think_close, tokenizer=tokenizer)
        return _construct(self.target, options, {"think_close": think_close, "tokenizer": tokenizer})


def _construct(target: Callable[..., Any], options: Mapping[str, Any], given: Mapping[str, Any]) -> Any:
    """``target(**options)`` for a class, plus those of the ``given`` arguments its constructor takes that the
    options do not set; a function as it is. An option the class does not take is a `ValueError` listing the
    ones it does."""
    if not isinstance(target, type):
        if options:
            raise ValueError(f"{_label(target)} is a reward function: it takes no options, got {sorted(options)}")
        return target
    accepted = _parameters(target)
    unknown = sorted(set(options) - accepted) if "**" not in accepted else []
    if unknown:
        raise ValueError(
            f"{target.__name__} takes no option {unknown[0]!r}; its options: {', '.join(sorted(accepted)) or 'none'}"
            + _close_match(unknown[0], accepted)
        )
    extra = {k: v for k, v in given.items() if k in accepted and k not in options}
    return target(**extra, **options)


def _close_match(value: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(value, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _parameters(cls: type) -> set[str]:
    """The keyword arguments ``cls(...)`` takes (``"**"`` among them when it takes any)."""
    names = set()
    for parameter in inspect.signature(cls).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            names.add("**")
        elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
            names.add(parameter.name)
    return names


def _label(target: Any) -> str:
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)


# -- the built-ins assembled from parts ---------------------------------------------------------------------


def _doubt(options: dict[str, Any], *, think_close: str, tokenizer: Any = None) -> DoubtReward:
    """The doubt reward; ``correctness`` (a mapping) holds the options of the correctness verdicts it pays
    on with ``pay_for: recovery`` (ignored with ``pay_for: expression``, which needs none)."""
    verdicts = options.pop("correctness", None) or {}
    if options.get("pay_for", "recovery") == "recovery":
        options["correctness"] = _construct(CorrectnessReward, verdicts, {"think_close": think_close})
    return _construct(DoubtReward, options, {"think_close": think_close})


def _length(options: dict[str, Any], *, think_close: str, tokenizer: Any = None) -> LengthOverheadReward:
    """The length reward; with ``unit: tokens`` it counts in the policy's tokenizer against the
    ``reference_tokens`` column, else characters against ``reference_length``."""
    tokens = options.get("unit", "chars") == "tokens"
    options.setdefault("reference_column", "reference_tokens" if tokens else "reference_length")
    policy = {"think_close": think_close, "tokenizer": tokenizer if tokens else None}
    return _construct(LengthOverheadReward, options, policy)


def _recovery(options: dict[str, Any], *, think_close: str, tokenizer: Any = None) -> RecoveryReward:
    """The combined reward: ``correctness``, ``doubt`` and ``length`` hold each part's options (as for the
    reward of that name), ``weights`` the three weights in that order (a ``*_weight`` option set alone wins)."""
    parts = {name: dict(options.pop(name, None) or {}) for name in ("correctness", "doubt", "length")}
    weights = options.pop("weights", None)
    if weights is not None:
        weights = list(weights)
        if len(weights) != 3:
            raise ValueError(f"weights needs 3 numbers (correctness, doubt, length), got {weights}")
        for key, weight in zip(("correctness_weight", "doubt_weight", "length_weight"), weights, strict=True):
            options.setdefault(key, weight)  # a weight set on its own wins
    policy = {"think_close": think_close, "tokenizer": tokenizer}
    return _construct(
        RecoveryReward,
        options,
        {
            "correctness": _construct(CorrectnessReward, parts["correctness"], {"think_close": think_close}),
            "doubt": _doubt(parts["doubt"], **policy),
            "length": _length(parts["length"], **policy),
        },
    )


#: The rewards by the short name recipes use (``reward_funcs: [correctness, doubt, length]``); a new reward is
#: its class plus one line here (or in a plug-in, `recovery.registry`). `reward_class` also finds each by its
#: ``__name__`` and class name.
REWARDS: Registry[RewardSpec] = Registry(
    "reward",
    {
        "correctness": RewardSpec(CorrectnessReward),
        "doubt": RewardSpec(DoubtReward, _doubt),
        "length": RewardSpec(LengthOverheadReward, _length),
        "recovery": RewardSpec(RecoveryReward, _recovery),
    },
)


def reward_spec(name: str) -> RewardSpec:
    """The entry called ``name``: its short name (a key of `REWARDS`), its ``__name__`` or its class name;
    `ValueError` naming the known rewards for any other."""
    if name in REWARDS:
        return REWARDS[name]
    for spec in REWARDS.values():
        target = spec.target
        if name == _label(target) or name == getattr(target, "__dict__", {}).get("__name__"):
            return spec
    raise ValueError(REWARDS.unknown(name))


def reward_class(name: str) -> Any:
    """The reward called ``name`` (see `reward_spec`): its class, or its function.

    >>> reward_class("length_overhead_reward")(max_overhead=0.5).max_overhead
    0.5
    """
    return reward_spec(name).target


def build_reward(
    name: str, options: Mapping[str, Any] | None = None, *, think_close: str = "</think>", tokenizer: Any = None
) -> Any:
    """The reward callable ``name`` names, built with ``options`` (see the module docstring); errors name the
    reward (``reward_options.<name>: ...``)."""
    spec = reward_spec(name)
    try:
        return spec.create(options or {}, think_close=think_close, tokenizer=tokenizer)
    except (TypeError, ValueError) as err:
        raise ValueError(f"reward_options.{name}: {err}") from None
