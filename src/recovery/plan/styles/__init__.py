"""Protocol styles as objects: each builds what every protocol part (`recovery.protocol.PARTS`) runs under it.

A style is a `Style` registered in `recovery.protocol.STYLES` under its name. The project's own
(`recovery.plan.styles.project`, ``default``) and the authors' (`recovery.plan.styles.authors`, ``reference``)
each live in one module with the values they cite; the package declares both as its own plug-ins
(pyproject.toml), so the first read of the registry loads them. A lab's own style (its prompts, a later
paper's length measure) is one module: a subclass of `recovery.plan.styles.project.ProjectStyle` that
overrides the parts it changes, and one ``STYLES.register(name, style)``; a run then names it in ``protocol``
or, per part, in ``protocol_parts``.

`recovery.plan.plan_for` asks each part's style for that part once; everything downstream holds the object it
got, not the style's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from recovery.doubt import SENTENCE_SPLITTERS
from recovery.plan.doubt import UnitRules
from recovery.protocol import STYLES

if TYPE_CHECKING:
    from recovery.interventions import TextRules
    from recovery.plan.parts import LengthMeasure, SelectionPlan, TraceReading
    from recovery.prompt_building.turns import ChatPrompts
    from recovery.run_config import GradingConfig

__all__ = ["Style", "style_named", "unit_rules"]


class Style(ABC):
    """What each protocol part runs under one style; ``name`` is the name runs give it."""

    name: str

    @abstractmethod
    def prompts(self, template: str | None) -> ChatPrompts:
        """Part "prompts": the chat the model is shown and how it becomes tokens (``template``: the run's
        ``dataset.prompt_template``, which a style may ignore)."""

    @abstractmethod
    def budget(self) -> int | None:
        """Part "budget": the window prompt and output share, in tokens (None: none)."""

    @abstractmethod
    def interventions(self) -> TextRules:
        """Part "interventions": the rules the paper's seven interventions are built with."""

    @abstractmethod
    def reading(self) -> TraceReading:
        """Part "interventions": how a response is read into reasoning and answer (which responses are traces)."""

    @abstractmethod
    def selection(self) -> SelectionPlan:
        """Part "selection": how problems and traces are chosen."""

    @abstractmethod
    def length(self) -> LengthMeasure:
        """Part "length": how a continuation's length overhead is measured."""

    @abstractmethod
    def grading(self, grading: GradingConfig) -> GradingConfig:
        """Part "grading": the run's ``grading`` as this style grades."""

    @abstractmethod
    def judge_sees_authors_input(self, grading: GradingConfig) -> bool:
        """Parts "grading" and "selection": whether the answer judge of the (resolved) ``grading`` is shown the
        authors' input (`recovery.plan.JudgeInputs`)."""

    @abstractmethod
    def doubt(self, splitter: str | None = None) -> UnitRules:
        """Part "doubt": the units the doubt analysis classifies (``splitter`` overrides the style's)."""

    def cites(self) -> str | None:
        """What a protocol label names for this style (the code it follows), or None."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __eq__(
        self, other: object
    ) -> bool:  # one style per class and name (a module imported again registers it again)
        return type(other) is type(self) and other.name == self.name

    def __hash__(self) -> int:
        return hash((type(self), self.name))


def style_named(name: str) -> Style:
    """The registered style called ``name``; `ValueError` naming the known ones for any other."""
    return STYLES.lookup(name)


def unit_rules(protocol: str, splitter: str | None = None) -> UnitRules:
    """The doubt units of the style called ``protocol``; ``splitter`` overrides its splitter.

    >>> unit_rules("reference").max_unit_chars, unit_rules("default", "reference").splitter
    (1000, 'reference')
    """
    if splitter is not None and splitter not in SENTENCE_SPLITTERS:
        raise ValueError(f"splitter must be one of {', '.join(SENTENCE_SPLITTERS)}, got {splitter!r}")
    return style_named(protocol).doubt(splitter)
