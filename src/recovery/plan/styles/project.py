"""The project's own protocol style (``default``): the toolkit's chat conventions, cleaned interventions with
per-item seeds, the project's selection and length measure, the configured grading, and doubt units of the
continuation's reasoning (each part's reasons are in `recovery.prompt_building.turns`,
`recovery.interventions.rules`, `recovery.plan.parts` and `recovery.plan.doubt`)."""

from __future__ import annotations

from recovery.interventions.rules import DEFAULT_RULES, TextRules
from recovery.plan.doubt import UnitRules
from recovery.plan.parts import LengthMeasure, SelectionPlan, TraceReading
from recovery.plan.styles import Style
from recovery.prompt_building.turns import ChatPrompts, ProjectPrompts
from recovery.protocol import DEFAULT_STYLE, STYLES
from recovery.run_config import GradingConfig

__all__ = ["JUDGE_TOKENS", "PROJECT", "ProjectStyle"]

#: New tokens of the doubt judge's reply: enough for "Yes" or "No" and a stop.
JUDGE_TOKENS = 8


class ProjectStyle(Style):
    """The project's protocol; a new style subclasses it and overrides the parts it changes."""

    name = DEFAULT_STYLE

    def prompts(self, template: str | None) -> ChatPrompts:
        return ProjectPrompts(template)

    def budget(self) -> int | None:
        return None

    def interventions(self) -> TextRules:
        return DEFAULT_RULES

    def reading(self) -> TraceReading:
        return TraceReading()

    def selection(self) -> SelectionPlan:
        return SelectionPlan()

    def length(self) -> LengthMeasure:
        return LengthMeasure()

    def grading(self, grading: GradingConfig) -> GradingConfig:
        return grading

    def judge_sees_authors_input(self, grading: GradingConfig) -> bool:
        return False

    def doubt(self, splitter: str | None = None) -> UnitRules:
        return UnitRules(
            self.name,
            splitter or "default",
            whole_continuation=False,
            max_unit_chars=None,
            judge_tokens=JUDGE_TOKENS,
            window_source="the continuation's reasoning, up to the closing think tag",
        )


PROJECT = STYLES.register(ProjectStyle.name, ProjectStyle())
