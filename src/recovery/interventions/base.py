"""What an intervention is, and the registry that maps names to implementations.

An intervention receives an `InterventionContext` (the problem, the trace's steps, the cut, a private
random generator and, for LLM-backed ones, a text generator) and returns an `Edit`: the new prefix steps
and the text it inserted. It raises `InterventionFailed` with a reason when it cannot produce a usable
edit (e.g. the LLM replied with nothing usable); callers count those failures instead of crashing.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from recovery.generation import TextGenerator
from recovery.types import Category, Cut, Problem, Step, Trace

_STEP_TEXT = operator.attrgetter("text")


class InterventionFailed(RuntimeError):
    """The intervention could not produce a usable edit for this item. ``reason`` is a short tag."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason


@dataclass(frozen=True)
class InterventionContext:
    """Everything an intervention may look at for one (trace, timestep) item."""

    problem: Problem
    trace: Trace
    steps: tuple[Step, ...]
    cut: Cut
    rng: random.Random
    generator: TextGenerator | None = None

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


@runtime_checkable
class Intervention(Protocol):
    """The interface every intervention implements."""

    name: str
    category: Category
    needs_generator: bool

    def apply(self, ctx: InterventionContext) -> Edit: ...


@dataclass(frozen=True)
class InterventionSpec:
    """A registry entry: how to build an intervention and what it is."""

    name: str
    category: Category
    factory: Callable[..., Intervention]
    description: str = ""
    needs_generator: bool = False
    family: str = "paper"  # "paper" for the paper's seven, "toy" for the toy world's, or a user tag
    defaults: Mapping[str, Any] = field(default_factory=dict)


REGISTRY: dict[str, InterventionSpec] = {}


def register(spec: InterventionSpec, *, replace: bool = False) -> InterventionSpec:
    """Add an intervention to the registry. Names are unique unless ``replace=True``."""
    if spec.name in REGISTRY and not replace:
        raise ValueError(f"intervention {spec.name!r} is already registered")
    REGISTRY[spec.name] = spec
    return spec


def get_spec(name: str) -> InterventionSpec:
    """Look up a registry entry, with the known names in the error."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown intervention {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def create(name: str, **options: Any) -> Intervention:
    """Instantiate a registered intervention with its defaults overridden by ``options``."""
    spec = get_spec(name)
    return spec.factory(**{**spec.defaults, **options})
