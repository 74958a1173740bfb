"""A run resolved once into its plan: for each protocol part (`recovery.protocol.PARTS`) the implementation or
values it runs with, picked here from the style the part runs in (``protocol``, ``protocol_parts``).

Everything that acts on a run (the stages, the mini-benchmark, teachers, exports, analyses, reports) reads the
part it needs from the `RunPlan` and never asks which protocol it is under; this module is the only place
that does. The plan's ``config`` is the run's config with its grading resolved (under the authors' grading:
every continuation graded, their judge prompt and input), which is what a run's manifest records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from recovery.plan.doubt import UnitRules, unit_rules
from recovery.plan.parts import JudgeInputs, LengthMeasure, SelectionPlan
from recovery.prompt_building.turns import AuthorsPrompts, ChatPrompts, ProjectPrompts
from recovery.protocol import PARTS, Protocol, part_style, reference
from recovery.run_config import GradingConfig, RunConfig

__all__ = ["RunPlan", "plan_for", "protocol_label", "resolved_config"]

_REFERENCE: Protocol = "reference"


@dataclass(frozen=True)
class RunPlan:
    """One run's protocol, resolved: what each part runs (see the module docstring)."""

    config: RunConfig  # with ``grading`` resolved (`resolved_config`)
    styles: Mapping[str, Protocol]  # each part's style, for labels and manifests
    prompts: ChatPrompts  # part "prompts": the chat, how the prefill follows it, how outputs are stored
    max_total_tokens: int | None  # part "budget": the window prompt and output share (None: none)
    interventions: str  # part "interventions": the name of the paper's seven's text rules (`PROTOCOL_RULES`)
    selection: SelectionPlan  # part "selection"
    length: LengthMeasure  # part "length"
    judge_inputs: JudgeInputs  # parts "grading" and "selection": what the answer judge is shown
    doubt: UnitRules  # part "doubt": the units and the reading of the judge's replies

    @property
    def grading(self) -> GradingConfig:
        """Part "grading": the run's grading as resolved (`resolved_config`)."""
        return self.config.grading

    @property
    def label(self) -> str:
        """How reports and exports name the run's protocol (`protocol_label`)."""
        return protocol_label(self.config.protocol, self.config.protocol_parts)


def _authors(config: RunConfig, part: str) -> bool:
    return part_style(config.protocol, config.protocol_parts, part) == _REFERENCE


def authors_grading(grading: GradingConfig) -> GradingConfig:
    """``grading`` as the authors grade (part ``grading``): every continuation graded, closed or not (``unclosed:
    grade``), and, when a judge is configured, the judge decides (``primary: judge``) with the authors' prompt
    (``judge_prompt: reference``). Without a judge the rule-based grader stays primary: the authors have none,
    and a run without a judge model has no other verdict. (scripts/judge_answers.py ``main``.)"""
    if grading.judge is None:
        return replace(grading, unclosed="grade")
    return replace(grading, unclosed="grade", primary="judge", judge_prompt="reference")


def resolved_config(config: RunConfig) -> RunConfig:
    """``config`` with its grading as its ``grading`` part runs it (the authors' under ``reference``); a config
    already resolved comes back equal."""
    if not _authors(config, "grading"):
        return config
    return replace(config, grading=authors_grading(config.grading))


def plan_for(config: RunConfig) -> RunPlan:
    """The plan of ``config``: each part's implementation, picked once from its style."""
    config = resolved_config(config)
    styles = {part: part_style(config.protocol, config.protocol_parts, part) for part in PARTS}
    authors = {part for part, style in styles.items() if style == _REFERENCE}
    authors_judge = config.grading.judge is not None and config.grading.judge_prompt == _REFERENCE
    return RunPlan(
        config=config,
        styles=MappingProxyType(styles),
        prompts=AuthorsPrompts() if "prompts" in authors else ProjectPrompts(config.dataset.prompt_template),
        max_total_tokens=int(reference()["max_model_len"]) if "budget" in authors else None,
        interventions=styles["interventions"],
        selection=SelectionPlan(
            authors_order="selection" in authors,
            cap_after_filter="selection" in authors,
            judge_grades_traces="selection" in authors,
        ),
        length=LengthMeasure(whole_response="length" in authors, label=styles["length"]),
        judge_inputs=JudgeInputs(
            grades=authors_judge and "grading" in authors,
            selection=authors_judge and "selection" in authors,
        ),
        doubt=unit_rules(styles["doubt"]),
    )


def protocol_label(protocol: str, parts: Mapping[str, str] | None = None) -> str:
    """How reports and exports name a run's protocol: ``default``, or ``reference`` with the commit it
    follows, and any parts mixed in from the other style.

    >>> protocol_label("default")
    'default'
    >>> protocol_label("reference", {"length": "default"})
    'reference (ExplainableML/RLLM-CoT-Robustness@f3ec899; length: default)'
    """
    mixed = {part: style for part, style in (parts or {}).items() if style != protocol}
    uses_reference = protocol == _REFERENCE or _REFERENCE in mixed.values()
    details = []
    if uses_reference:
        ref = reference()
        details.append(f"{ref.repo}@{ref.short_commit}")
    details.extend(f"{part}: {style}" for part, style in mixed.items())
    return f"{protocol} ({'; '.join(details)})" if details else protocol
