"""The zero-shot prompt asking for the first wrong step, and reading the model's reply."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from recovery.analysis.bbm.data import BBMItem

PROMPT_VERSION = "bbm-prompt-v1"  # part of every answer's key: a new prompt never reuses old answers
# Where a reasoning model's final answer starts: think tags (DeepSeek/Qwen/Phi: </think>, EXAONE:
# </thought>) and gpt-oss's final channel, with and without its special tokens decoded.
FINAL_MARKERS: tuple[str, ...] = ("</think>", "</thought>", "<|channel|>final<|message|>", "assistantfinal")


def build_prompt(item: BBMItem) -> str:
    """The zero-shot user turn: the question, the numbered steps, and the requested answer format.

    The paper evaluated reasoning models zero-shot but does not print its prompt; this wording is ours.
    Steps are numbered from 1, so the expected answer is ``mistake_index + 1``.
    """
    steps = "\n".join(f"Step {i}: {text.strip()}" for i, text in enumerate(item.steps, start=1))
    return (
        "Below is a question followed by a step-by-step solution with numbered steps. A step contains a "
        "mistake if its reasoning or calculation is wrong, given the question and the steps before it. "
        "Some solutions contain no mistake.\n\n"
        f"Question:\n{item.question.strip()}\n\n"
        f"Solution:\n{steps}\n\n"
        "Which step contains the FIRST mistake? If every step is correct, say that there is no mistake. "
        'End your reply with one line of the form "Answer: Step N", where N is the number of the first '
        'incorrect step, or "Answer: No mistake".'
    )


@dataclass(frozen=True)
class ParsedAnswer:
    """What a reply says: ``kind`` is ``step`` (with ``step``), ``no_mistake`` or ``unparseable``;
    ``detail`` tells where it was found, or why nothing was."""

    kind: Literal["step", "no_mistake", "unparseable"]
    step: int | None = None
    detail: str = ""


_STEP_REF = re.compile(r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b", re.IGNORECASE)
# "no mistake" and its variants, but not "no mistake in step 2" (a claim about one step only).
_NO_MISTAKE = re.compile(
    r"\b(?:no\s+(?:logical\s+)?(?:mistakes?|errors?|incorrect\s+steps?|wrong\s+steps?|flaws?)|none|"
    r"(?:mistake|error)[- ]free|all\s+(?:of\s+)?(?:the\s+)?steps\s+are\s+correct|every\s+step\s+is\s+correct|"
    r"does\s+not\s+contain\s+any\s+(?:mistakes?|errors?))\b"
    r"(?!\s+(?:in|at|until|before|up\s+to|through)\s+step)",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\s*\W*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_FIRST_THEN_STEP = re.compile(
    r"\b(?:first|earliest)\s+(?:\w+\s+){0,2}?(?:mistake|error|incorrect|wrong|flaw)\w*\b[^.\n]{0,80}?"
    r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b",
    re.IGNORECASE,
)
_STEP_THEN_FIRST = re.compile(
    r"\bstep\s*(?:#|no\.?|number)?\s*(\d+)\b[^.\n]{0,60}?\b(?:first|earliest)\s+(?:\w+\s+)?(?:mistake|error)",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(r"^\W*#?\s*(\d+)\s*\W*$")


def final_answer_part(reply: str, markers: Sequence[str] = FINAL_MARKERS) -> tuple[str, bool]:
    """The text after the last end-of-reasoning marker (``</think>`` …) and whether one was found."""
    end = -1
    for marker in markers:
        pos = reply.rfind(marker)
        if pos >= 0:
            end = max(end, pos + len(marker))
    return (reply[end:], True) if end >= 0 else (reply, False)


def _clean_span(text: str) -> str:
    text = re.sub(r"\\text(?:bf)?\s*\{([^{}]*)\}", r"\1", text)
    return text.replace("*", "").replace("`", "").strip().strip("\"'").strip()


def _parse_span(text: str) -> ParsedAnswer | None:
    """A short answer (boxed content, "Answer:" line): a step number or "no mistake", else None."""
    span = _clean_span(text)
    steps = {int(m.group(1)) for m in _STEP_REF.finditer(span)}
    if _NO_MISTAKE.search(span) and not steps:
        return ParsedAnswer("no_mistake")
    if len(steps) == 1:
        return ParsedAnswer("step", steps.pop())
    bare = _BARE_NUMBER.match(span)
    if bare and not steps:
        return ParsedAnswer("step", int(bare.group(1)))
    return None


def parse_mistake_answer(
    reply: str, *, finish_reason: str | None = None, markers: Sequence[str] = FINAL_MARKERS
) -> ParsedAnswer:
    """Read a reply: a 1-based step number, "no mistake", or unparseable with the reason.

    Looked at, in order, in the text after the last ``</think>`` (the whole reply if there is none):
    the last ``\\boxed{…}``, the last "Answer: …" line, a "first mistake … step N" phrase (or "step N
    … first error"), then the whole text — one distinct "step N" mention, a bare number, or a
    "no mistake" phrase with no step named. Several steps and no marker is ambiguous, hence unparseable.

    >>> parse_mistake_answer("<think>Step 2 looks odd.</think>The first mistake is in step 3.").step
    3
    >>> parse_mistake_answer("There are no mistakes.").kind
    'no_mistake'
    """
    if not isinstance(reply, str):
        return ParsedAnswer("unparseable", detail=f"reply is {type(reply).__name__}, not text")
    text, closed = final_answer_part(reply, markers)
    if not closed and finish_reason == "length":
        return ParsedAnswer("unparseable", detail="truncated: hit max_new_tokens before finishing its reasoning")
    if not text.strip():
        return ParsedAnswer("unparseable", detail="empty final answer" if closed else "empty reply")
    for pattern, where in ((_BOXED, "boxed"), (_ANSWER_LINE, "answer line")):
        found = list(pattern.finditer(text))
        if found:
            parsed = _parse_span(found[-1].group(1))
            if parsed is not None:
                return ParsedAnswer(parsed.kind, parsed.step, where)
    for pattern in (_FIRST_THEN_STEP, _STEP_THEN_FIRST):
        match = pattern.search(text)
        if match:
            return ParsedAnswer("step", int(match.group(1)), "first-mistake phrase")
    steps = sorted({int(m.group(1)) for m in _STEP_REF.finditer(text)})
    no_mistake = _NO_MISTAKE.search(text) is not None
    if len(steps) == 1 and not no_mistake:
        return ParsedAnswer("step", steps[0], "only step named")
    if not steps and no_mistake:
        return ParsedAnswer("no_mistake", None, "no-mistake phrase")
    if not steps:
        bare = _BARE_NUMBER.match(_clean_span(text))
        if bare:
            return ParsedAnswer("step", int(bare.group(1)), "bare number")
        return ParsedAnswer("unparseable", detail="names no step and does not say 'no mistake'")
    named = ", ".join(map(str, steps))
    extra = " and says 'no mistake'" if no_mistake else ""
    return ParsedAnswer("unparseable", detail=f"ambiguous: names steps {named}{extra}")
