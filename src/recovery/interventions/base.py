"""What an intervention is, and what a registry entry says about one.

An intervention receives an `InterventionContext` (the problem, the trace's steps, the cut, a private
random generator and, for LLM-backed ones, a text generator) and returns an `Edit`: the new prefix steps
and the text it inserted. It raises `InterventionFailed` with a reason when it cannot produce a usable
edit (e.g. the LLM replied with nothing usable); callers count those failures instead of crashing.
"""

from __future__ import annotations

import importlib
import operator
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from recovery.generation import TextGenerator
from recovery.registry import loading_plugin
from recovery.types import Category, Cut, Problem, Step, Trace

_STEP_TEXT = operator.attrgetter("text")


class InterventionFailed(RuntimeError):
    """The intervention could not produce a usable edit for this item. ``reason`` is a short tag."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason


@dataclass(frozen=True)
class InterventionContext:
    """Everything an intervention may look at for one (trace, timestep) item.

    ``position`` is the item's index within its batch of traces, as the authors' code numbers items; only
    the ``protocol: reference`` interventions read it (`recovery.interventions.reference`), the default
    ones draw from ``rng``.
    """

    problem: Problem
    trace: Trace
    steps: tuple[Step, ...]
    cut: Cut
    rng: random.Random
    generator: TextGenerator | None = None
    position: int | None = None

    @property
    def prefix_steps(self) -> tuple[str, ...]:
        """Original step texts ``0..cut.index`` (inclusive)."""
        return tuple(map(_STEP_TEXT, self.steps[: self.cut.index + 1]))


@dataclass(frozen=True, slots=True)
class Edit:
    """An intervention's result: the new prefix, as steps, and the text it added.

    ``notes`` are short tags for harmless fix-ups made on the way (e.g. ``"stripped_label"`` when an LLM
    reply was cleaned); batch runs count them, they never change the result.
    """

    prefix_steps: tuple[str, ...]
    inserted_text: str
    notes: tuple[str, ...] = ()


# How an intervention changes the prefix. Optional attribute ``edit_kind`` on an intervention; it tells
# `recovery.interventions.apply` where the next of k consecutive interventions goes (App. A.2).
#   "replace_last": R_k is replaced by new text        "append":  a new step follows R_k
#   "modify_last":  R_k is changed in place            "rewrite": the whole prefix is rewritten
EDIT_KINDS: tuple[str, ...] = ("replace_last", "append", "modify_last", "rewrite")


def steps_before_new(steps: tuple[str, ...], edit_kind: str) -> tuple[str, ...]:
    """The prefix steps a new step is placed after: R_1..R_{k-1} when it replaces R_k ("replace_last"),
    R_1..R_k when it follows R_k ("append")."""
    return steps[:-1] if edit_kind == "replace_last" else steps


@runtime_checkable
class Intervention(Protocol):
    """The interface every intervention implements."""

    name: str
    category: Category
    needs_generator: bool

    def apply(self, ctx: InterventionContext) -> Edit: ...


@dataclass(frozen=True)
class InterventionSpec:
    """A registry entry (`recovery.interventions.registry`): the intervention's class and a line about it.

    ``target`` is the class, or its ``"module:Class"`` path, imported when the entry is first used (for a
    class in a module above this package, or one that should not load until a run names it). The name,
    category and whether an LLM is needed are the class's own attributes; ``doc`` is the line that lists it
    (default: the first line of the class docstring). ``family`` groups it in ``recovery interventions``:
    "paper" for the paper's seven, "toy" for the toy world's; left out, the distribution of the plug-in
    registering it, else the top-level package of its module. ``follows_protocol``: the class takes the run
    protocol's `recovery.interventions.rules.TextRules` as ``rules`` (the paper's seven); others are built
    the same under every protocol.
    """

    target: type | str
    doc: str = ""
    family: str = ""
    follows_protocol: bool = False

    def __post_init__(self) -> None:
        if not self.family:
            module = self.target.partition(":")[0] if isinstance(self.target, str) else self.target.__module__
            object.__setattr__(self, "family", loading_plugin() or module.split(".")[0])

    @cached_property
    def cls(self) -> type:
        """The intervention's class (imported from its ``"module:Class"`` path on first use)."""
        if not isinstance(self.target, str):
            return self.target
        module, _, name = self.target.partition(":")
        if not name:
            raise ValueError(f"intervention class {self.target!r}: write it as 'module:Class'")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"intervention class {self.target!r} cannot be imported: {err}") from None

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def category(self) -> Category:
        return self.cls.category

    @property
    def needs_generator(self) -> bool:
        return self.cls.needs_generator

    @property
    def needs_pool(self) -> bool:
        """Whether the intervention needs a paragraph pool (``pool=``) from the run (*Wikipedia text*)."""
        return getattr(self.cls, "needs_pool", False)

    @property
    def description(self) -> str:
        """``doc``, else the first line of the class docstring."""
        return self.doc or (self.cls.__doc__ or "").strip().splitlines()[0]

    def create(self, *, rules: Any = None, **options: Any) -> Intervention:
        """An instance built with ``options`` (its factory's keyword arguments), under the protocol whose
        ``rules`` are given (None, or an entry that does not follow the protocol: built without them)."""
        if rules is not None and self.follows_protocol:
            return self.cls(rules=rules, **options)
        return self.cls(**options)
