"""Doubt after an intervention (paper §4.2): a sentence splitter and a fast lexical doubt detector.

The paper classifies each of the 20 sentences after the intervention point with an LLM judge (App. D.2)
and finds that doubt spikes right after an intervention and fades within about five sentences; the
largest clusters of doubtful sentences (App. E, Table 16) are short interjections: "Wait, no.",
"Wait, is that right?", "Let me switch gears", "No, that's not right either.", "Wait, but hang on.".
This module is the cheap lexical stand-in for that judge, used by `recovery.rewards.DoubtReward`; an
LLM judge can be added beside it without changing the interface.

A *sentence* ends at ``.``, ``!`` or ``?`` (runs of them, optionally followed by closing quotes or
brackets) followed by whitespace, or at a line break; decimals (``3.14``), list markers (``1.``) and a
few abbreviations (``e.g.``, ``i.e.``, ``vs.``) do not end one. Each family in `DOUBT_FAMILIES` is one
case-insensitive regular expression, matched on a sentence with typographic apostrophes made plain.

A second splitter, ``splitter="reference"``, reproduces the authors' reference implementation for
comparisons with published figures: the text is cut into blank-line segments and each is split by spaCy's
rule-based sentencizer (needs the ``analysis`` extra, imported on first use). The default stays this
module's own splitter. See `SENTENCE_SPLITTERS`.

Cost is bounded: the splitter is lazy (asking for the first k sentences reads only as far as it must) and
`first_doubt` looks at most at the first ``max_chars`` characters.

>>> split_sentences("Hmm, so x = 3.5. Wait, no. That's not right!\\n\\nLet me recheck: 2 + 2 = 4.")
['Hmm, so x = 3.5.', 'Wait, no.', "That's not right!", 'Let me recheck: 2 + 2 = 4.']
>>> doubt_family("Hold on, the sign is wrong."), doubt_family("So the sum is 12.")
('hold_on', None)
>>> first_doubt("So x = 4.\\n\\nActually, x = 5 since we add one.", k=3)
DoubtHit(index=1, family='actually', sentence='Actually, x = 5 since we add one.')
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = [
    "DEFAULT_FIRST_SENTENCES",
    "DOUBT_FAMILIES",
    "MAX_SCAN_CHARS",
    "SENTENCE_SPLITTERS",
    "DoubtHit",
    "doubt_family",
    "doubt_flags",
    "first_doubt",
    "is_doubt",
    "iter_sentences",
    "split_sentences",
]

#: How many sentences after the intervention point count as "right after" it (doubt fades within ~5).
DEFAULT_FIRST_SENTENCES = 3
#: `first_doubt` and `doubt_flags` never look further than this into a text.
MAX_SCAN_CHARS = 10_000
#: Sentence splitters by name. "default": this module's rules (a line break ends a sentence). "reference":
#: what the authors' reference implementation does to find doubt units (github.com/ExplainableML/
#: RLLM-CoT-Robustness @ f3ec899, scripts/analyze_doubt.py `sentence_units` with its default
#: `--spacy-model sentencizer_en`): split the text on "\n\n" (rllm_robustness/segmentation.py
#: `segment_trace`), skip blank segments, run each stripped segment through `spacy.blank("en")` with the
#: "sentencizer" pipe, keep each sentence stripped and non-empty. (That script then cuts every unit to 1,000
#: characters for its judge; that is the judge's input, not the split, and is not done here.)
SENTENCE_SPLITTERS = ("default", "reference")

# One expression per family, in the order they are tried. Everything is case-insensitive.
_FAMILY_SOURCES: dict[str, str] = {
    "wait": r"\bwait\b",
    "hold_on": r"\b(?:hold|hang)\s+on\b",
    "let_me_check": (
        r"\blet(?:\s+me|'s|\s+us)\s+(?:just\s+)?(?:re-?check|double[-\s]?check|check|re-?verify|verify|re-?examine|confirm"
        r"|make\s+sure|re-?calculate|re-?compute|reconsider|re-?think|think\s+again)\b"
    ),
    "not_right": (
        r"\b(?:that|this|it)(?:'s|\s+is|\s+was)\s+(?:not\s+(?:right|correct)|wrong|incorrect)\b"
        r"|\b(?:that|this|it)\s+(?:isn't|wasn't|can't\s+be|cannot\s+be|doesn't\s+seem|does\s+not\s+seem)"
        r"\s+(?:right|correct)\b"
        r"|\b(?:doesn't|does\s+not)\s+make\s+sense\b"
    ),
    "mistake": (
        r"\bI(?:'ve|\s+have|\s+must\s+have|\s+might\s+have|\s+may\s+have)?\s+made\s+(?:a\s+|an\s+|some\s+)?"
        r"(?:mistake|error|miscalculation)s?\b"
        r"|\bmy\s+(?:mistake|error|bad)\b"
    ),
    "back_to_problem": (
        r"\bback\s+to\s+the\s+(?:original\s+|actual\s+|main\s+|given\s+)?(?:problem|question|task)\b"
        r"|\bback\s+on\s+track\b|\brefocus\b|\bswitch\s+gears\b"
    ),
    # Paper Table 16 (clusters 331, 97, 71): flagging that the text before is off-topic.
    "off_topic": (
        r"\b(?:that|this|it)(?:'s|\s+is|\s+was)\s+(?:not\s+(?:at\s+all\s+)?(?:related|relevant)|unrelated|irrelevant"
        r"|(?:a\s+)?(?:completely\s+|totally\s+|entirely\s+)?different\s+(?:topic|subject))\b"
        r"|\boff[-\s]topic\b|\bnothing\s+to\s+do\s+with\b|\b(?:got|get|getting)\s+sidetracked\b"
    ),
    "hmm": r"\bhm+\b",
    "actually": r"(?:^|[,;:(\u2014-]\s*|\bbut\s+|\bno\s+)actually\b",
    "no": r"(?:^|[,;:\u2014]\s*)no(?:\s*[,.!;?]|\s*$)",
    "second_thought": r"\bon\s+second\s+thoughts?\b",
}

#: Doubt families (name → compiled pattern), tried in this order; the first match names the family.
DOUBT_FAMILIES: Mapping[str, re.Pattern[str]] = {
    name: re.compile(source, re.IGNORECASE) for name, source in _FAMILY_SOURCES.items()
}
_ANY_DOUBT = re.compile("|".join(f"(?:{s})" for s in _FAMILY_SOURCES.values()), re.IGNORECASE)

_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]*_]*(?=\s|$)|\n")
_ENUMERATOR = re.compile(r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,4})[.)]")  # a list marker is not a sentence
_ABBREVIATION = re.compile(r"(?:^|[\s(])(?:e\.g|i\.e|vs|etc|cf|approx|resp|Dr|Mr|Mrs|Ms|Fig|Eq)\.$", re.IGNORECASE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def iter_sentences(text: str, *, splitter: str = "default") -> Iterator[str]:
    """Yield the sentences of ``text`` (stripped, never empty), lazily, in order, split by ``splitter``
    (a name in `SENTENCE_SPLITTERS`)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    split = _SPLITTERS.get(splitter)
    if split is None:
        raise ValueError(f"unknown sentence splitter {splitter!r}; known: {', '.join(SENTENCE_SPLITTERS)}")
    return split(text)


def _default_sentences(text: str) -> Iterator[str]:
    start = 0
    for match in _END.finditer(text):
        end = match.end()
        sentence = text[start:end].strip()
        if match.group() != "\n" and (_ENUMERATOR.fullmatch(sentence) or _ABBREVIATION.search(sentence[-12:])):
            continue  # "1." / "e.g." / "Fig." — the sentence goes on
        start = end
        if sentence:
            yield sentence
    tail = text[start:].strip()
    if tail:
        yield tail


@cache
def _sentencizer() -> Any:
    """spaCy's blank English pipeline with only the rule-based sentencizer (no model to download)."""
    try:
        import spacy
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the reference sentence splitter needs spaCy: pip install 'recovery[analysis]'") from err
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def _reference_sentences(text: str) -> Iterator[str]:
    """The reference splitter (see `SENTENCE_SPLITTERS`): spaCy's sentencizer inside blank-line segments."""
    nlp = _sentencizer()
    for segment in text.split("\n\n"):
        segment = segment.strip()
        if not segment:
            continue
        if len(segment) >= nlp.max_length:  # spaCy refuses longer texts; one huge segment must not stop a run
            nlp.max_length = len(segment) + 1
        for sentence in nlp(segment).sents:
            stripped = sentence.text.strip()
            if stripped:
                yield stripped


_SPLITTERS = {"default": _default_sentences, "reference": _reference_sentences}  # by `SENTENCE_SPLITTERS` name


def split_sentences(text: str, limit: int | None = None, *, splitter: str = "default") -> list[str]:
    """The first ``limit`` sentences of ``text`` (all of them when ``limit`` is None), split by ``splitter``.

    >>> split_sentences("x = 2\\ny = 3. Wait, no.\\n\\nSo 4.")
    ['x = 2', 'y = 3.', 'Wait, no.', 'So 4.']
    >>> split_sentences("x = 2\\ny = 3. Wait, no.\\n\\nSo 4.", splitter="reference")
    ['x = 2\\ny = 3.', 'Wait, no.', 'So 4.']
    """
    out: list[str] = []
    if limit is not None and limit <= 0:
        iter_sentences(text, splitter=splitter)  # still reject a bad text or splitter name
        return out
    for sentence in iter_sentences(text, splitter=splitter):
        out.append(sentence)
        if limit is not None and len(out) >= limit:
            break
    return out


def doubt_family(sentence: str) -> str | None:
    """The doubt family ``sentence`` belongs to (the first that matches), or None.

    >>> doubt_family("Wait, is that right?"), doubt_family("No, that's not right either."), doubt_family("No, 7.")
    ('wait', 'not_right', 'no')
    >>> doubt_family("I think I made a mistake in step 2."), doubt_family("Let me double-check the sum.")
    ('mistake', 'let_me_check')
    """
    s = sentence.translate(_APOSTROPHES)
    if _ANY_DOUBT.search(s) is None:  # one pass for the common case: no doubt at all
        return None
    for name, pattern in DOUBT_FAMILIES.items():
        if pattern.search(s):
            return name
    return None  # pragma: no cover - the combined pattern matched, so one family does


def is_doubt(sentence: str) -> bool:
    """Whether ``sentence`` expresses doubt about the reasoning before it (lexically)."""
    return doubt_family(sentence) is not None


@dataclass(frozen=True, slots=True)
class DoubtHit:
    """The first doubtful sentence: its position among the sentences, its family and its text."""

    index: int
    family: str
    sentence: str


def first_doubt(
    text: str, k: int = DEFAULT_FIRST_SENTENCES, *, max_chars: int = MAX_SCAN_CHARS, splitter: str = "default"
) -> DoubtHit | None:
    """The first doubtful sentence among the first ``k`` sentences of ``text`` (split by ``splitter``), or None.

    Only the first ``max_chars`` characters are read, so the cost does not grow with the text.

    >>> first_doubt("x = 2. y = 3. z = 4. Wait, z = 5.", k=3) is None
    True
    >>> first_doubt("x = 2. y = 3. z = 4. Wait, z = 5.", k=4).family
    'wait'
    """
    for index, sentence in enumerate(split_sentences(text[:max_chars], k, splitter=splitter)):
        family = doubt_family(sentence)
        if family is not None:
            return DoubtHit(index, family, sentence)
    return None


def doubt_flags(text: str, n: int = 20, *, max_chars: int = MAX_SCAN_CHARS, splitter: str = "default") -> list[bool]:
    """Doubt (True/False) for each of the first ``n`` sentences of ``text`` (split by ``splitter``) — the
    paper's 20-sentence window.

    >>> doubt_flags("Okay. Wait, no. So 5.")
    [False, True, False]
    """
    return [is_doubt(s) for s in split_sentences(text[:max_chars], n, splitter=splitter)]
