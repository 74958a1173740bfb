"""What each protocol part runs, as data: the plan's parts other than the prompts (`recovery.prompt_building`'s
`ProjectPrompts` / `AuthorsPrompts`) and the grading (a resolved `GradingConfig`).

Each is decided once, by `recovery.plan.plan_for`, from the style the part runs in (`recovery.protocol.PARTS`);
the code that runs a part reads these values and never asks which protocol it is under.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JudgeInputs", "LengthMeasure", "SelectionPlan"]


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


@dataclass(frozen=True)
class LengthMeasure:
    """How a continuation's length overhead is measured (part "length").

    ``whole_response``: the authors' measure, the complete answer against the whole original response
    (`recovery.metrics.reference`, `recovery.run_dir.reference_lengths`); otherwise the project's, on reasoning
    less the inserted characters (`recovery.metrics.length_change_pct`). ``label`` names it in reports."""

    whole_response: bool = False
    label: str = "default"


@dataclass(frozen=True)
class JudgeInputs:
    """Whether the answer judge is shown the authors' input (the question with their instruction, the last
    characters after the last ``</think>``: `recovery.grading.judge`) when it grades continuations (``grades``)
    and original traces (``selection``). Only with the authors' judge prompt."""

    grades: bool = False
    selection: bool = False
