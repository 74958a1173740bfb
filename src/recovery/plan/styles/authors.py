"""The authors' protocol style (``reference``): ExplainableML/RLLM-CoT-Robustness at the commit in
``prompts/reference_protocol.yaml`` (`recovery.protocol.reference`), part by part as docs/reproducing.md lists
the differences. The values below are cited to the file of theirs that sets them; the rest are read from the
YAML file, each cited there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from recovery.interventions.reference import REFERENCE_RULES
from recovery.interventions.reference_text import authors_trace
from recovery.interventions.rules import TextRules
from recovery.plan.doubt import UnitRules
from recovery.plan.parts import LengthMeasure, SelectionPlan, TraceReading
from recovery.plan.styles import Style
from recovery.prompt_building.turns import AuthorsPrompts, ChatPrompts
from recovery.protocol import STYLES, reference
from recovery.run_config import GradingConfig
from recovery.segment import SegmentationError, ThinkTags
from recovery.types import Trace

__all__ = [
    "AUTHORS",
    "JUDGE_TOKENS",
    "REFERENCE_LENGTH",
    "AuthorsReading",
    "AuthorsStyle",
    "WholeResponseLength",
    "authors_grading",
]

#: New tokens of the doubt judge's reply (rllm_robustness/constants.py DOUBT_DECODING; scripts/analyze_doubt.py
#: --max-new-tokens).
JUDGE_TOKENS = 10

#: What the length columns measure under the authors' length part, as a report's captions say it.
REFERENCE_LENGTH = (
    "the complete answer (prefix, separator, continuation) without the intervention text, against the whole "
    "original response (the authors' measure, protocol: reference)"
)

# The judge prompt that is theirs (`recovery.run_config.GradingConfig.judge_prompt`).
_AUTHORS_JUDGE_PROMPT = "reference"


class WholeResponseLength(LengthMeasure):
    """The authors' length overhead: the complete answer against the whole original response, less the
    intervention's text (`recovery.metrics.reference`, `recovery.run_dir.reference_lengths`), averaged over
    completions."""

    label = "reference"
    caption = REFERENCE_LENGTH
    per_completion = True

    def whole_pct(self, lengths: Any, index: Any, text: Any, project_pct: Any) -> Any:
        return lengths.whole_response.pct(index, text)


class AuthorsReading(TraceReading):
    """The authors' reading of a response (rllm_robustness/segmentation.py ``extract_reasoning``, which takes
    either family's tags): a response its model's own tags read is read as the project reads it (the
    interventions take their reasoning from its text again: `recovery.interventions.reference`); any other,
    such as an R1 response in ``<thought>`` tags or one with no tag at all, is read their way
    (`recovery.interventions.reference_text.authors_trace`) instead of being dropped, so it takes its place in
    their batches."""

    def trace(self, problem_id: str, model: str, text: str, *, tags: ThinkTags, trace_id: str = "") -> Trace:
        try:
            return super().trace(problem_id, model, text, tags=tags, trace_id=trace_id)
        except SegmentationError:
            return authors_trace(problem_id, model, text, trace_id=trace_id)

    def without_prompt(self, response: str, tags: ThinkTags) -> str | None:
        """From the model's own opening tag on where there is one, else the response as it is (their
        extraction finds the reasoning after whichever opening tag it holds)."""
        stripped = super().without_prompt(response, tags)
        return response if stripped is None else stripped


def authors_grading(grading: GradingConfig) -> GradingConfig:
    """``grading`` as the authors grade (part ``grading``): every continuation graded, closed or not (``unclosed:
    grade``), and, when a judge is configured, the judge decides (``primary: judge``) with the authors' prompt
    (``judge_prompt: reference``). Without a judge the rule-based grader stays primary: the authors have none,
    and a run without a judge model has no other verdict. (scripts/judge_answers.py ``main``.)"""
    if grading.judge is None:
        return replace(grading, unclosed="grade")
    return replace(grading, unclosed="grade", primary="judge", judge_prompt=_AUTHORS_JUDGE_PROMPT)


class AuthorsStyle(Style):
    """The authors' protocol, part by part (`recovery.protocol.PARTS` says what each part changes)."""

    name = "reference"

    def prompts(self, template: str | None) -> ChatPrompts:
        return AuthorsPrompts()  # their user turn in every domain: the run's template does not apply

    def budget(self) -> int | None:
        return int(reference()["max_model_len"])

    def interventions(self) -> TextRules:
        return REFERENCE_RULES

    def reading(self) -> TraceReading:
        return AuthorsReading()

    def selection(self) -> SelectionPlan:
        return SelectionPlan(authors_order=True, cap_after_filter=True, judge_grades_traces=True)

    def length(self) -> LengthMeasure:
        return WholeResponseLength()

    def grading(self, grading: GradingConfig) -> GradingConfig:
        return authors_grading(grading)

    def judge_sees_authors_input(self, grading: GradingConfig) -> bool:
        return grading.judge is not None and grading.judge_prompt == _AUTHORS_JUDGE_PROMPT

    def doubt(self, splitter: str | None = None) -> UnitRules:
        """scripts/analyze_doubt.py ``main`` with its defaults ``--unit sentence --text-source continuations
        --max-sentences 20 --max-unit-chars 1000`` (see `recovery.plan.doubt`)."""
        cap = int(reference()["doubt_max_unit_chars"])
        return UnitRules(
            self.name,
            splitter or "reference",
            whole_continuation=True,
            max_unit_chars=cap,
            authors_reading=True,
            judge_tokens=JUDGE_TOKENS,
            description=" Units follow the authors' protocol (`protocol: reference`): sentences of the whole "
            f"continuation, each cut to {cap:,} characters, shown to the judge with newlines as spaces; a judge "
            'reply counts as doubt when it starts with "yes", anything else as No.',
            window_source="the whole continuation",
        )

    def cites(self) -> str | None:
        ref = reference()
        return f"{ref.repo}@{ref.short_commit}"


AUTHORS = STYLES.register(AuthorsStyle.name, AuthorsStyle())
