"""Small frozen value types shared by every part of `recovery`.

They carry data only; the functions that create and transform them live in `segment`, `interventions`,
`grading` and `metrics`. Each record has a content-addressed ``id`` (see `recovery.ids`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, get_args

from recovery.ids import content_id, continuation_id

# What a continuation whose reasoning never closed gets (`recovery.grading.verdict`): no final answer, never
# correct (the project's protocol), or graded on its whole text (the authors' reference implementation).
Unclosed = Literal["no_answer", "grade"]
UNCLOSED_POLICIES: tuple[str, ...] = get_args(Unclosed)


def check_unclosed(policy: str) -> str:
    """``policy`` when it is one of `UNCLOSED_POLICIES`; else `ValueError` naming them."""
    if policy not in UNCLOSED_POLICIES:
        raise ValueError(f"unclosed must be one of {', '.join(UNCLOSED_POLICIES)}, got {policy!r}")
    return policy


class AnswerType(StrEnum):
    """How a reference answer is compared with a model's answer."""

    NUMERIC = "numeric"  # a number; compared with a tolerance
    EXPRESSION = "expression"  # a math expression; compared symbolically (math-verify)
    MULTIPLE_CHOICE = "multiple_choice"  # one option letter, e.g. "(C)" or "C"
    MULTI_SELECT = "multi_select"  # a set of option letters, e.g. "ACD" (JEEBench MCQ(multiple))
    YES_NO = "yes_no"  # Yes / No
    TRUE_FALSE = "true_false"  # True / False
    VALID_INVALID = "valid_invalid"  # valid / invalid (BBH formal fallacies)
    DYCK = "dyck"  # a closing-bracket sequence, e.g. "] ) }"
    EXACT = "exact"  # normalised string equality


class Category(StrEnum):
    """The paper's three intervention categories (Table 2)."""

    BENIGN = "benign"
    NEUTRAL = "neutral"
    ADVERSARIAL = "adversarial"


class Verdict(StrEnum):
    """Why a continuation was graded the way it was. Only ``CORRECT`` counts as correct."""

    CORRECT = "correct"
    WRONG = "wrong"
    NO_ANSWER = "no_answer"  # no final answer could be found in the text
    UNPARSABLE_GOLD = "unparsable_gold"  # the reference answer itself cannot be interpreted
    TIMEOUT = "timeout"  # the comparison did not finish within its time budget
    ERROR = "error"  # unexpected failure, message kept in ``Grade.detail``


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True, slots=True)
class Problem:
    """One evaluation problem. ``id`` is derived from (source, question, answer) when not given."""

    domain: str
    question: str
    answer: str
    answer_type: AnswerType
    source: str
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "answer_type", AnswerType(self.answer_type))
        object.__setattr__(self, "metadata", _frozen_mapping(self.metadata))
        if not self.id:
            object.__setattr__(self, "id", content_id("problem", self.source, self.question, self.answer))


@dataclass(frozen=True, slots=True)
class Trace:
    """A model's original response to a problem, split into reasoning and the final-answer part.

    ``text`` is the full response; ``reasoning`` is what lies between the think tags; ``answer_text`` is
    what follows the closing tag. ``closed`` is False when the closing think tag was never emitted.
    """

    problem_id: str
    model: str
    text: str
    reasoning: str
    answer_text: str
    closed: bool = True
    think_open: str = "<think>"
    think_close: str = "</think>"
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", content_id("trace", self.problem_id, self.model, self.text))


@dataclass(frozen=True, slots=True)
class Step:
    """One reasoning step: ``reasoning[start:end] == text``; ``t`` is the cumulative-character timestep."""

    index: int
    text: str
    start: int
    end: int
    t: float


@dataclass(frozen=True, slots=True)
class Cut:
    """Where an intervention lands: the prefix keeps steps ``0..index`` (inclusive)."""

    index: int
    target_t: float
    actual_t: float


@dataclass(frozen=True, slots=True)
class Intervened:
    """An intervened reasoning prefix, ready to be continued by a model.

    ``prefix`` is the reasoning text the model resumes from (without the opening think tag).
    ``inserted_text`` is the text the intervention added (removed again when measuring length overhead);
    ``original_prefix_chars`` and ``original_reasoning_chars`` are the lengths of the un-intervened prefix
    (steps ``0..cut_index``) and of the whole original reasoning.
    """

    trace_id: str
    problem_id: str
    model: str
    intervention: str
    category: Category
    target_t: float
    actual_t: float
    cut_index: int
    n_steps: int
    prefix: str
    inserted_text: str
    original_prefix_chars: int
    original_reasoning_chars: int
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "category", Category(self.category))
        object.__setattr__(self, "options", _frozen_mapping(self.options))
        if not self.id:
            object.__setattr__(
                self,
                "id",
                content_id(
                    "intervened", self.trace_id, self.intervention, self.target_t, self.seed, dict(self.options)
                ),
            )


@dataclass(frozen=True, slots=True)
class Continuation:
    """One sampled continuation of an intervened chain (the text after the prefix)."""

    chain_id: str
    sample_index: int
    text: str
    n_tokens: int | None = None
    finish_reason: str | None = None
    model: str = ""
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", continuation_id(self.chain_id, self.sample_index))


@dataclass(frozen=True, slots=True)
class Grade:
    """The verdict on one answer, with the answer that was extracted and a human-readable detail."""

    verdict: Verdict
    extracted: str | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if type(self.verdict) is not Verdict:  # the Enum lookup costs more than the rest of a Grade
            object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT
