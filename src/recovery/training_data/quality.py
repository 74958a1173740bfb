"""Quality filters for recovery continuations (what an SFT example must satisfy).

A candidate is one continuation of an intervened chain, from the model itself or from a teacher. It is
kept only if every enabled check passes; the first failing check names the drop reason:

``not_correct``            the final answer is not the reference answer (stored grade or fresh grading)
``ungraded``               no grade is stored for it (only when correctness is required)
``think_close_count``      not exactly one closing think tag in the continuation
``think_reopened``         the continuation opens a new think block
``no_final_answer`` / ``multiple_final_answers`` / ``unclosed_final_answer``
                           the text after the closing tag must hold exactly one ``\\boxed{…}``
``answer_not_at_end``      something other than punctuation follows that box
``wrong_step`` / ``unverifiable_step``
                           toy world only: a step the continuation writes states a wrong value, or is not
                           a toy step at all (other domains skip this check: nothing can verify their steps)
``no_doubt``               (optional) no doubt expression among the first sentences of the continuation
``length_overhead``        the CoT-length overhead exceeds the cap
``not_shortest``           another passing candidate of the same chain (and origin) is shorter

All checks are lexical and bounded in cost; none evaluates model text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from recovery.doubt import DEFAULT_FIRST_SENTENCES, first_doubt
from recovery.grading.extract import closing_brace
from recovery.metrics import LengthChange, continuation_reasoning, length_change
from recovery.segment import split_steps
from recovery.toy import is_toy_problem, spec_of
from recovery.toy.steps import check_is_correct, claim_is_correct, is_check, parse_step
from recovery.training_data.drops import Drops
from recovery.types import Intervened, Problem

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# After the final box only closing punctuation may follow: ".", "$", "$$", "\]", "**", brackets.
_ANSWER_TAIL = re.compile(r"[\s.,;:!$*)\]}\\]*")


@dataclass
class QualityConfig:
    """Which checks run (see module doc). ``max_overhead_pct`` caps the length overhead in percent on
    ``overhead_basis``: ``"whole"`` = the paper's measure (whole CoT with the inserted text removed vs the
    original CoT), ``"remaining"`` = the continuation vs the original reasoning after the cut. None
    disables the cap. ``doubt_sentences`` is the window for ``require_doubt``."""

    require_correct: bool = True
    single_think_close: bool = True
    final_answer_at_end: bool = True
    verify_steps: bool = True
    allow_unparsed_steps: bool = False
    require_doubt: bool = False
    doubt_sentences: int = DEFAULT_FIRST_SENTENCES
    max_overhead_pct: float | None = 100.0
    overhead_basis: Literal["whole", "remaining"] = "whole"
    shortest_of_n: bool = True

    def __post_init__(self) -> None:
        if self.overhead_basis not in ("whole", "remaining"):
            raise ValueError(f"overhead_basis must be 'whole' or 'remaining', got {self.overhead_basis!r}")
        if self.doubt_sentences < 1:
            raise ValueError("doubt_sentences must be ≥ 1")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A continuation proposed as the recovery for ``chain``. ``correct`` is the grade (None: ungraded)."""

    chain: Intervened
    problem: Problem
    completion: str
    origin: str  # "own" (the model's sample) or "teacher"
    correct: bool | None
    sample_index: int = 0
    think_open: str = "<think>"
    think_close: str = "</think>"


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict on one candidate: ``reason`` is None when it passed; ``doubt`` is the doubt family
    found in the first sentences (or None); ``overhead`` the length change (None if undefined)."""

    reason: str | None
    doubt: str | None
    overhead: LengthChange | None

    @property
    def ok(self) -> bool:
        return self.reason is None


# ------------------------------------------------------------------------------------ single checks


def final_answer_problem(answer_text: str) -> str | None:
    """Why ``answer_text`` (what follows the closing think tag) does not end with exactly one boxed
    answer; None when it does.

    >>> final_answer_problem("\\n\\nThe answer is \\\\boxed{9}.")
    >>> final_answer_problem("\\\\boxed{9} and then more words")
    'answer_not_at_end'
    >>> final_answer_problem("\\\\boxed{9} or \\\\boxed{8}")
    'multiple_final_answers'
    """
    boxes = list(_BOX.finditer(answer_text))
    if not boxes:
        return "no_final_answer"
    if len(boxes) > 1:
        return "multiple_final_answers"
    pos = boxes[0].end()
    while pos < len(answer_text) and answer_text[pos] in " \t":
        pos += 1
    if pos >= len(answer_text) or answer_text[pos] != "{":
        return "unclosed_final_answer"
    i = closing_brace(answer_text, pos)
    if i is None:
        return "unclosed_final_answer"
    return None if _ANSWER_TAIL.fullmatch(answer_text[i + 1 :]) else "answer_not_at_end"


def toy_step_problem(problem: Problem, prefix: str, completion: str, *, allow_unparsed: bool = False) -> str | None:
    """Toy world: every step the continuation writes must be a correct toy step (`parse_step` /
    `claim_is_correct`; a self-check must redo a step right). A continuation that finishes the prefix's
    last step (no separator first) is checked on that whole step. None when all pass, or when ``problem``
    is not a toy problem."""

    if not is_toy_problem(problem):
        return None
    spec = spec_of(problem)
    text = prefix + continuation_reasoning(completion)
    for step in split_steps(text):
        if step.end <= len(prefix) or not step.text.strip():
            continue  # a prefix step (the intervention's business, not the recovery's) or blank
        if is_check(step.text):  # the self-checking style: a check must redo a step right
            if not check_is_correct(step.text, spec):
                return "wrong_step"
            continue
        claim = parse_step(step.text, spec)
        if claim is None:
            if not allow_unparsed:
                return "unverifiable_step"
        elif not claim_is_correct(claim, spec):
            return "wrong_step"
    return None


def _overhead(chain: Intervened, completion: str, think_close: str) -> LengthChange | None:
    try:
        return length_change(chain, completion, think_close=think_close)
    except ValueError:  # an empty original reasoning: overhead undefined
        return None


def assess(candidate: Candidate, config: QualityConfig) -> Assessment:
    """Run the enabled checks on one candidate, in the order of the module doc."""
    text = candidate.completion
    reasoning = continuation_reasoning(text, candidate.think_close)
    hit = first_doubt(reasoning.lstrip(), config.doubt_sentences)
    doubt = hit.family if hit else None
    overhead = _overhead(candidate.chain, text, candidate.think_close)

    def verdict(reason: str | None) -> Assessment:
        return Assessment(reason, doubt, overhead)

    if config.require_correct and candidate.correct is not True:
        return verdict("not_correct" if candidate.correct is False else "ungraded")
    if config.single_think_close:
        if text.count(candidate.think_close) != 1:
            return verdict("think_close_count")
        if candidate.think_open in text:
            return verdict("think_reopened")
    if config.final_answer_at_end:
        close = text.rfind(candidate.think_close)
        answer = text[close + len(candidate.think_close) :] if close >= 0 else ""
        reason = final_answer_problem(answer)
        if reason:
            return verdict(reason)
    if config.verify_steps:
        reason = toy_step_problem(
            candidate.problem, candidate.chain.prefix, text, allow_unparsed=config.allow_unparsed_steps
        )
        if reason:
            return verdict(reason)
    if config.require_doubt and doubt is None:
        return verdict("no_doubt")
    if config.max_overhead_pct is not None and overhead is not None:
        value = overhead.whole_pct if config.overhead_basis == "whole" else overhead.remaining_pct
        if value is not None and value > config.max_overhead_pct:
            return verdict("length_overhead")
    return verdict(None)


def select(
    candidates: Iterable[Candidate], config: QualityConfig, drops: Drops, *, stage: str = "quality"
) -> list[tuple[Candidate, Assessment]]:
    """Candidates that pass every check, then (``shortest_of_n``) the shortest per (chain, origin) —
    ties go to the lowest sample index. Every rejection is counted in ``drops`` under ``stage``."""
    passed: dict[tuple[str, str], list[tuple[Candidate, Assessment]]] = defaultdict(list)
    order: list[tuple[str, str]] = []
    for candidate in candidates:
        result = assess(candidate, config)
        if not result.ok:
            drops.add(stage, result.reason or "rejected")
            continue
        key = (candidate.chain.id, candidate.origin)
        if key not in passed:
            order.append(key)
        passed[key].append((candidate, result))
    kept: list[tuple[Candidate, Assessment]] = []
    for key in order:
        group = passed[key]
        if config.shortest_of_n and len(group) > 1:
            group = sorted(group, key=lambda cr: (len(cr[0].completion), cr[0].sample_index))
            drops.add(stage, "not_shortest", len(group) - 1)
            group = group[:1]
        kept.extend(group)
    return kept


def passes(candidates: Sequence[Candidate], config: QualityConfig) -> list[bool]:
    """Convenience for tests and notebooks: which candidates pass the per-candidate checks."""
    return [assess(c, config).ok for c in candidates]
