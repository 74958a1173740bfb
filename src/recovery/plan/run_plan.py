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

from recovery.interventions.rules import TextRules
from recovery.plan.doubt import UnitRules
from recovery.plan.parts import JudgeInputs, LengthMeasure, SelectionPlan, TraceReading
from recovery.plan.styles import Style, style_named
from recovery.prompt_building.turns import ChatPrompts
from recovery.protocol import PARTS, part_style
from recovery.run_config import GradingConfig, RunConfig

__all__ = ["RunPlan", "plan_for", "protocol_label", "resolved_config"]


@dataclass(frozen=True)
class RunPlan:
    """One run's protocol, resolved: what each part runs (see the module docstring)."""

    config: RunConfig  # with ``grading`` resolved (`resolved_config`)
    styles: Mapping[str, str]  # each part's style's name, for labels and manifests
    prompts: ChatPrompts  # part "prompts": the chat, how it and the prefill become tokens, how outputs are stored
    max_total_tokens: int | None  # part "budget": the window prompt and output share (None: none)
    interventions: TextRules  # part "interventions": the rules the paper's seven are built with
    reading: TraceReading  # part "interventions": how a response is read into a trace
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


def _part_styles(config: RunConfig) -> dict[str, Style]:
    return {part: style_named(part_style(config.protocol, config.protocol_parts, part)) for part in PARTS}


def resolved_config(config: RunConfig) -> RunConfig:
    """``config`` with its grading as its ``grading`` part's style grades (the authors' under ``reference``); a
    config already resolved comes back equal."""
    grading = _part_styles(config)["grading"].grading(config.grading)
    return config if grading == config.grading else replace(config, grading=grading)


def plan_for(config: RunConfig) -> RunPlan:
    """The plan of ``config``: each part built once by the style it runs in."""
    config = resolved_config(config)
    styles = _part_styles(config)
    return RunPlan(
        config=config,
        styles=MappingProxyType({part: style.name for part, style in styles.items()}),
        prompts=styles["prompts"].prompts(config.dataset.prompt_template),
        max_total_tokens=styles["budget"].budget(),
        interventions=styles["interventions"].interventions(),
        reading=styles["interventions"].reading(),
        selection=styles["selection"].selection(),
        length=styles["length"].length(),
        judge_inputs=JudgeInputs(
            grades=styles["grading"].judge_sees_authors_input(config.grading),
            selection=styles["selection"].judge_sees_authors_input(config.grading),
        ),
        doubt=styles["doubt"].doubt(),
    )


def protocol_label(protocol: str, parts: Mapping[str, str] | None = None) -> str:
    """How reports and exports name a run's protocol: its style's name, with the code each style in it follows
    (`Style.cites`) and any parts mixed in from another style.

    >>> protocol_label("default")
    'default'
    >>> protocol_label("reference", {"length": "default"})
    'reference (ExplainableML/RLLM-CoT-Robustness@f3ec899; length: default)'
    """
    mixed = {part: style for part, style in (parts or {}).items() if style != protocol}
    used = dict.fromkeys([protocol, *mixed.values()])
    details = [cited for cited in (style_named(name).cites() for name in used) if cited]
    details.extend(f"{part}: {style}" for part, style in mixed.items())
    return f"{protocol} ({'; '.join(details)})" if details else protocol
