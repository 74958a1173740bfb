"""Turn a raw LLM reply into text that can be spliced into a reasoning chain, or fail with a reason.

Instruct models wrap their answer in labels ("Next step:", "**Step 3:**"), quotes, markdown or code
fences, answer with several paragraphs when one step was asked for, or echo the reasoning they were shown.
Spliced in verbatim, these artefacts would be part of the intervention and blank lines inside a single
step would change the segmentation of the intervened chain. The rules, in order:

1. strip surrounding whitespace, code fences, a leading label, wrapping quotes or emphasis (repeatedly,
   since they nest: ``Next step: "**I need to ...**"``) and remove think tags anywhere (a ``</think>``
   inside the prefix would end the reasoning block);
2. nothing left → `FailureReason.EMPTY_REPLY`;
3. single-step replies: paragraphs (split on blank lines) that only repeat the reasoning the model was
   shown are dropped; none left → `FailureReason.REPEATS_PREFIX`; more than one left → policy
   ``"first"`` (default: keep the first paragraph), ``"collapse"`` (join them with single newlines) or
   ``"reject"`` (`FailureReason.MULTI_STEP`);
4. whole-trace rewrites (paraphrase): re-split on blank lines into steps; a rewrite identical to the
   original up to whitespace and case → `FailureReason.REPEATS_PREFIX`.

Every fix-up that changes the text is recorded as a note (vocabulary `NOTES`) so runs can count them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from recovery.interventions.base import InterventionFailed


class FailureReason(StrEnum):
    """Why an intervention produced no edit: the fixed vocabulary of `InterventionFailed.reason`."""

    EMPTY_REPLY = "empty_reply"  # nothing usable left after cleaning
    REPEATS_PREFIX = "repeats_prefix"  # the reply only repeats reasoning the model was shown
    MULTI_STEP = "multi_step"  # several paragraphs where one step was asked for (policy "reject")
    GENERATOR_ERROR = "generator_error"  # the text generator raised or returned a non-string
    STEP_TOO_SHORT = "step_too_short"  # the target step is too short to change (random characters)
    BETWEEN_UNAVAILABLE = "between_unavailable"  # k consecutive: no in-between paragraph available
    TRUNCATED_REWRITE = "truncated_rewrite"  # a paraphrase cut at max_new_tokens: the prefix's end is missing
    NOT_A_REWRITE = "not_a_rewrite"  # a "paraphrase" far shorter than what it rewrites (a chat reply)


# Notes: fix-ups that kept the reply usable. Counted by batch runs, never a failure.
STRIPPED_LABEL = "stripped_label"
STRIPPED_WRAPPER = "stripped_wrapper"  # quotes, emphasis or inline code around the whole reply
STRIPPED_CODE_FENCE = "stripped_code_fence"
REMOVED_THINK_TAG = "removed_think_tag"
DROPPED_REPEATED_PARAGRAPH = "dropped_repeated_paragraph"
CUT_TO_FIRST_PARAGRAPH = "cut_to_first_paragraph"
COLLAPSED_BLANK_LINES = "collapsed_blank_lines"
TRUNCATED_STEP = "truncated_step"  # a step reply cut at max_new_tokens: kept, its end is missing
# A rewrite keeps "every single piece of information" (App. D.1): one under this share of the original's
# characters is a reply about the task, not a rewrite of it.
MIN_REWRITE_RATIO = 0.2
NOTES: tuple[str, ...] = (
    STRIPPED_LABEL,
    STRIPPED_WRAPPER,
    STRIPPED_CODE_FENCE,
    REMOVED_THINK_TAG,
    DROPPED_REPEATED_PARAGRAPH,
    CUT_TO_FIRST_PARAGRAPH,
    COLLAPSED_BLANK_LINES,
    TRUNCATED_STEP,
)

MultiParagraph = Literal["first", "collapse", "reject"]
MULTI_PARAGRAPH_POLICIES: tuple[str, ...] = ("first", "collapse", "reject")

# Labels the D.1 prompts invite ("Next step:", "Next (incorrect) step:", "Wrong statement:", "Rewritten
# trace:", "Unrelated reasoning step about <TOPIC>:") and common variants ("Step 3:", "Reasoning step:").
_LABELS = (
    r"next\s+(?:\(incorrect\)\s+|incorrect\s+|reasoning\s+)?step(?:\s*\d+)?",
    r"(?:incorrect|wrong)\s+(?:reasoning\s+)?step(?:\s*\d+)?",
    r"(?:reasoning\s+)?step\s*\d*",
    r"(?:wrong|false|fabricated|incorrect)\s+(?:mathematical\s+)?statement",
    r"(?:hallucinated|fabricated)\s+fact",
    r"(?:rewritten|paraphrased)\s+(?:reasoning\s+)?trace",
    r"unrelated\s+reasoning\s+step(?:\s+about\s+[^:\n]{1,200})?",
)
# A label at the very start: optional heading marks, optional emphasis around the label, then a colon
# (inside or outside the emphasis); a bare label on its own line is a label too.
_LABEL_RE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?P<em>\*\*|__|\*)?[ \t]*(?:" + "|".join(_LABELS) + r")[ \t]*"
    r"(?(em)(?:(?P=em)[ \t]*:|:[ \t]*(?P=em)|(?P=em)[ \t]*(?=\n|$))|(?::|(?=\n|$)))[ \t]*",
    re.IGNORECASE,
)
_FENCE_RE = re.compile(r"^```[^\n`]*\n(?P<body>.*?)\n?```$", re.DOTALL)
_THINK_TAG_RE = re.compile(r"</?(?:think|thought)>", re.IGNORECASE)
_BLANK_LINE_RE = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
# (opening, closing) pairs that may wrap a whole reply.
_WRAPPERS = (
    ('"', '"'),
    ("“", "”"),
    ("'", "'"),
    ("‘", "’"),
    ("«", "»"),
    ("**", "**"),
    ("__", "__"),
    ("*", "*"),
    ("`", "`"),
)


@dataclass(frozen=True, slots=True)
class Cleaned:
    """A cleaned reply and the fix-ups (`NOTES`) that produced it."""

    text: str
    notes: tuple[str, ...] = ()


def _normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def split_paragraphs(text: str) -> list[str]:
    """Non-empty paragraphs of ``text``, split on blank lines (whitespace-only lines count as blank).

    >>> split_paragraphs("a\\n\\n  \\nb\\nc\\n \\n")
    ['a', 'b\\nc']
    """
    return [p.strip() for p in _BLANK_LINE_RE.split(text) if p.strip()]


def strip_wrappers(text: str, notes: list[str] | None = None) -> str:
    """Remove surrounding whitespace, code fences, a leading label, wrapping quotes/emphasis and any think
    tags, repeatedly until nothing changes. Fix-ups are appended to ``notes`` (once per kind).

    >>> strip_wrappers('Next step: "**I need to add 2.**"')
    'I need to add 2.'
    """
    notes = [] if notes is None else notes

    def note(tag: str) -> None:
        if tag not in notes:
            notes.append(tag)

    if _THINK_TAG_RE.search(text):
        text = _THINK_TAG_RE.sub("", text)
        note(REMOVED_THINK_TAG)
    for _ in range(10):  # bounded: each pass removes at least one character or stops
        before = text
        text = text.strip()
        fence = _FENCE_RE.match(text)
        if fence:
            text = fence.group("body")
            note(STRIPPED_CODE_FENCE)
            continue
        label = _LABEL_RE.match(text)
        if label and label.end() > 0:
            text = text[label.end() :]
            note(STRIPPED_LABEL)
            continue
        for opening, closing in _WRAPPERS:
            inner = text[len(opening) : len(text) - len(closing)]
            # Only when the marker does not occur inside: "*a* + *b*" is not one emphasised span.
            if (
                len(text) >= len(opening) + len(closing)
                and text.startswith(opening)
                and text.endswith(closing)
                and opening not in inner
                and closing not in inner
            ):
                text = inner
                note(STRIPPED_WRAPPER)
                break
        if text == before:
            break
    return text.strip()


def clean_step_reply(reply: object, *, seen: str = "", multi_paragraph: MultiParagraph = "first") -> Cleaned:
    """Clean a reply that should be ONE reasoning step (complete step, wrong continuation, hallucinated
    fact, unrelated CoT). ``seen`` is the reasoning the model was shown (for the repeat check).

    Raises `InterventionFailed` with a `FailureReason` when nothing usable is left.

    >>> clean_step_reply("**Step 3:** I need to add 2.\\n\\nThen divide.").text
    'I need to add 2.'
    """
    if multi_paragraph not in MULTI_PARAGRAPH_POLICIES:
        raise ValueError(f"multi_paragraph must be one of {MULTI_PARAGRAPH_POLICIES}, got {multi_paragraph!r}")
    if not isinstance(reply, str):
        raise InterventionFailed(FailureReason.GENERATOR_ERROR, f"reply is {type(reply).__name__}, not str")
    notes: list[str] = []
    paragraphs = [strip_wrappers(p, notes) for p in split_paragraphs(strip_wrappers(reply, notes))]
    paragraphs = [p for p in paragraphs if p]
    if not paragraphs:
        raise InterventionFailed(FailureReason.EMPTY_REPLY, "reply is empty after cleaning")
    seen_norm = _normalise(seen)
    fresh = [p for p in paragraphs if not (seen_norm and _normalise(p) in seen_norm)]
    if not fresh:
        raise InterventionFailed(FailureReason.REPEATS_PREFIX, "reply only repeats the reasoning it was shown")
    if len(fresh) < len(paragraphs):
        notes.append(DROPPED_REPEATED_PARAGRAPH)
    if len(fresh) == 1:
        text = fresh[0]
    elif multi_paragraph == "reject":
        raise InterventionFailed(FailureReason.MULTI_STEP, f"reply has {len(fresh)} paragraphs, one was asked for")
    elif multi_paragraph == "collapse":
        text = "\n".join(fresh)
        notes.append(COLLAPSED_BLANK_LINES)
    else:
        text = fresh[0]
        notes.append(CUT_TO_FIRST_PARAGRAPH)
    return Cleaned(text, tuple(notes))


def clean_rewrite_reply(reply: object, *, original: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Clean a whole-trace rewrite (paraphrase) and re-split it into steps on blank lines.

    Returns ``(steps, notes)``. Raises `InterventionFailed` when the reply is empty or repeats ``original``.

    >>> clean_rewrite_reply("Rewritten trace:\\nFirst, x.\\n\\n\\nThen y.", original="x then y")[0]
    ('First, x.', 'Then y.')
    """
    if not isinstance(reply, str):
        raise InterventionFailed(FailureReason.GENERATOR_ERROR, f"reply is {type(reply).__name__}, not str")
    notes: list[str] = []
    steps = tuple(split_paragraphs(strip_wrappers(reply, notes)))
    if not steps:
        raise InterventionFailed(FailureReason.EMPTY_REPLY, "rewrite is empty after cleaning")
    if _normalise("\n\n".join(steps)) == _normalise(original):
        raise InterventionFailed(FailureReason.REPEATS_PREFIX, "rewrite is identical to the original reasoning")
    if getattr(reply, "truncated", False):
        raise InterventionFailed(FailureReason.TRUNCATED_REWRITE, "the rewrite was cut at max_new_tokens")
    length, target = len("\n\n".join(steps)), len(original.strip())
    if target and length < MIN_REWRITE_RATIO * target:
        raise InterventionFailed(
            FailureReason.NOT_A_REWRITE, f"{length} characters for a {target}-character prefix: not a rewrite"
        )
    return steps, tuple(notes)


def collapse_blank_lines(text: str) -> str:
    """Replace every run of blank lines with one newline, so ``text`` stays a single step.

    >>> collapse_blank_lines("a\\n\\n \\nb")
    'a\\nb'
    """
    return _BLANK_LINE_RE.sub("\n", text)
