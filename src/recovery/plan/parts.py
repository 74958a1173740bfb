"""What each protocol part runs: the plan's parts other than the prompts (`recovery.prompt_building`'s
`ProjectPrompts` / `AuthorsPrompts`), the interventions' rules (`recovery.interventions.TextRules`), the doubt
units (`recovery.plan.doubt.UnitRules`) and the grading (a resolved `GradingConfig`).

Each is built once, by `recovery.plan.plan_for`, by the style the part runs in (`recovery.plan.styles`); the
code that runs a part reads these objects and never asks which protocol it is under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from recovery.segment import ThinkTags, parse_trace
from recovery.types import Trace

__all__ = ["JudgeInputs", "LengthMeasure", "SelectionPlan", "TraceReading"]


@dataclass(frozen=True)
class SelectionPlan:
    """Problem and trace selection (part "selection").

    ``authors_order``: the filter stage's order is the authors' (reference-solved, intersection on correctness,
    then per model closed, longest, answer cap, draw: `recovery.data.reference_selection`) rather than the
    project's (correct and closed, solved by every model). ``cap_after_filter``: NuminaMath's per-answer cap is
    applied by that order, after the intersection, not when the problems are loaded. ``judge_grades_traces``: the
    answer judge, when configured, grades the original traces for the filter (their ``--mode single``)."""

    authors_order: bool = False
    cap_after_filter: bool = False
    judge_grades_traces: bool = False


class LengthMeasure:
    """How a continuation's length overhead is measured (part "length"): the project's measure, on reasoning less
    the inserted characters (`recovery.metrics.length_change_pct`), which the tallies compute for every chain.

    A style with a measure of its own subclasses this: `whole_pct` gives a continuation's overhead from what the
    run holds (``lengths``: `recovery.run_dir.tallies.RunLengths`, the run's chains and, on demand, the
    authors' whole-response lengths), ``caption`` says in a report what its columns measure, and
    ``per_completion`` averages a cell over completions rather than chains (the authors' averaging)."""

    label: ClassVar[str] = "default"  # names the measure in reports and tests
    caption: ClassVar[str | None] = None  # what a report's length columns measure; None: the project's own words
    per_completion: ClassVar[bool] = False

    def whole_pct(self, lengths: Any, index: Any, text: Any, project_pct: Any) -> Any:
        """The overhead (in %) of each continuation in ``text`` (an Arrow string array) of the chains at
        positions ``index`` of ``lengths.chains``; ``project_pct`` is the project's measure of them."""
        return project_pct

    def __eq__(self, other: object) -> bool:  # stateless: one measure per class
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(label={self.label!r})"


@dataclass(frozen=True)
class JudgeInputs:
    """Whether the answer judge is shown the authors' input (the question with their instruction, the last
    characters after the last ``</think>``: `recovery.grading.judge`) when it grades continuations (``grades``)
    and original traces (``selection``). Only with the authors' judge prompt."""

    grades: bool = False
    selection: bool = False


class TraceReading:
    """How a response becomes a `Trace` (part "interventions", whose segmentation reads it): the project's reads
    it by its model's own think ``tags`` only, and a response without them is no trace
    (`recovery.segment.parse_trace` raises `recovery.segment.SegmentationError`; the traces stage counts it as
    ``no_think_tag``). Every reader of a run's responses reads through its plan's reading, so a trace one
    stage kept is a trace to every later one."""

    def trace(self, problem_id: str, model: str, text: str, *, tags: ThinkTags, trace_id: str = "") -> Trace:
        return parse_trace(problem_id, model, text, tags=tags, trace_id=trace_id)

    def without_prompt(self, response: str, tags: ThinkTags) -> str | None:
        """An imported ``response`` that may start with its prompt, from its first opening think tag (of its
        model's own ``tags``) on; None when it has none (no trace)."""
        position = response.find(tags[0]) if tags[0] else -1
        return response[position:] if position >= 0 else None

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
