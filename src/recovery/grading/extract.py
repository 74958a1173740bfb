"""Find the final answer in a model response.

Rules, in order (first hit wins): the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces; a truncated
last box counts as no box); the last "answer is X" / "final answer: X" / "correct option is X"; then a
type-specific last resort (see `extract_answer`). Regex rules only look at the last `MAX_SCAN_CHARS`
characters, and a box may hold at most `MAX_BOX_CHARS`, so that no regular expression runs over the whole
of a very long response. Categorical answers come back normalised (`recovery.grading.normalize`).
"""

from __future__ import annotations

import re

from recovery.grading.normalize import (
    LABEL_WORDS,
    LABELS,
    clean_answer,
    normalize_choice,
    normalize_choices,
    normalize_dyck,
    normalizer,
)
from recovery.grading.numeric import parse_numeric
from recovery.grading.reading import plain_decimal_comma
from recovery.segment import THINK, ThinkTags, answer_after_reasoning
from recovery.types import AnswerType

__all__ = [
    "MAX_SCAN_CHARS",
    "MAX_BOX_CHARS",
    "PLAIN_INTEGER",
    "answer_part",
    "closing_brace",
    "last_boxed",
    "plain_boxed_integer",
    "extract_answer",
    "extract_general",
]

#: Final answers sit at the end; phrase and last-resort rules scan only this many trailing characters.
MAX_SCAN_CHARS = 20_000
#: A ``\\boxed{`` whose closing brace is further away than this is treated as unclosed.
MAX_BOX_CHARS = 10_000

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_PHRASE = re.compile(
    r"(?i)\b(?:final\s+answer|answer|option|choice)\b"
    r"(?:\s+(?:is|would\s+be|will\s+be|should\s+be)\b\s*[:=]?|\s*[:=])"
)
_LAST_PAREN_LETTER = re.compile(r"\(([A-J])\)")
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.^{])(?:-\s*)?\\[dt]?frac\{[^{}]{1,40}\}\{[^{}]{1,40}\}"
    # A bare number stands on its own, as math-verify's plain-text reader wants it: after the start, a space,
    # "=", "*" (markdown) or a currency sign; not after "+" or "x" ("x^2+4x+4" holds no answer "4"). A comma
    # between digits that is no thousands separator is a decimal comma ("2,74"), as math-verify reads it.
    r"|(?<![^\s=*$(\[:€£])[-+\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+,\d+(?![\d.])|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*\\?%)?(?![\w^])"
)


def answer_part(response: str, tags: ThinkTags = THINK) -> str:
    """The text after the closing think tag of the response's model (its ``tags``; another family's tags are
    text), or the whole text when there is none: `recovery.segment.answer_after_reasoning`, the rule
    `recovery.grading.verdict` reads a continuation by, with unclosed reasoning graded whole.

    Continuations sampled after an intervention start inside the reasoning, so they usually carry only the
    closing tag; texts without any tag are graded whole (note: a continuation that never closed its
    reasoning is then graded on its reasoning).

    >>> answer_part("<think>so 3?</think>The answer is 4.")
    'The answer is 4.'
    >>> answer_part("no tags, answer 5")
    'no tags, answer 5'
    """
    if not isinstance(response, str):
        raise TypeError(f"response must be str, got {type(response).__name__}")
    section = answer_after_reasoning(response, tags)  # the one closure rule, as the verdict reads it
    return response if section is None else section


def closing_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``text[start]``; escaped braces (``\\{``) do not count."""
    depth = 0
    end = min(len(text), start + MAX_BOX_CHARS)
    i = start
    while i < end:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _last_box_start(text: str) -> tuple[int, int] | None:
    best = max(((text.rfind(cmd), cmd) for cmd in _BOX_COMMANDS), key=lambda x: x[0])
    if best[0] < 0:
        return None
    return best[0], best[0] + len(best[1])


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` or ``\\fbox{...}``; None when absent, empty or unclosed.

    >>> last_boxed(r"so \\boxed{1} then \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> last_boxed(r"\\boxed{\\boxed{5}}"), last_boxed(r"\\boxed{5"), last_boxed(r"\\boxed 7$")
    ('5', None, '7')
    """
    found = _last_box_start(text)
    if found is None:
        return None
    _, after = found
    rest_start = after
    while rest_start < len(text) and text[rest_start] in " \t":
        rest_start += 1
    if rest_start < len(text) and text[rest_start] == "{":
        close = closing_brace(text, rest_start)
        if close is None:
            return None
        content = text[rest_start + 1 : close].strip()
    elif rest_start > after:  # "\boxed 7": a single token
        content = re.split(r"[\s$]", text[rest_start : rest_start + 100], maxsplit=1)[0]
    else:
        return None
    return content or None


def _phrase_answer(window: str) -> str | None:
    last = None
    for last in _PHRASE.finditer(window):  # noqa: B007 — keeps the last match
        pass
    if last is None:
        return None
    rest = window[last.end() :].lstrip(" \t*_:")
    if rest.startswith("\n"):
        rest = rest.lstrip()
    line = rest.split("\n", 1)[0].strip()
    return line or None


#: A plain integer as the shortcuts take it: ASCII digits, no leading zero or plus sign, at most 15 digits.
PLAIN_INTEGER = r"0|-?[1-9][0-9]{0,14}"
_PLAIN_BOXED_INTEGER = re.compile(rf"\\boxed\{{({PLAIN_INTEGER})\}}")


def plain_boxed_integer(text: str) -> str | None:
    """The integer in ``text``'s last box when that box is exactly ``\\boxed{<integer>}`` (ASCII digits, no
    leading zero, at most 15 of them), else None.

    The common final answer of numeric benchmarks, read without the general scan (balanced braces,
    answer phrases, candidate narrowing): for such a text `extract_answer` gives this integer either way
    (tested against the general path).

    >>> plain_boxed_integer(r"so \\boxed{3} and finally \\boxed{-42}."), plain_boxed_integer(r"\\boxed{4.5}")
    ('-42', None)
    """
    start = text.rfind("\\boxed{")
    if start < 0 or text.find("\\boxed", start + 1) >= 0 or text.find("\\fbox", start) >= 0:
        return None  # no box, or a later box of another form: the general path decides
    match = _PLAIN_BOXED_INTEGER.match(text, start)
    return match.group(1) if match else None


def _numeric_candidate(candidate: str, *, from_phrase: bool) -> str:
    """Narrow a boxed/phrase answer to the number in it: ``x = 5`` → ``5``, ``42 (rounded)`` → ``42``."""
    s = plain_decimal_comma(clean_answer(candidate))
    if parse_numeric(s) is not None:
        return s
    if from_phrase:
        lead = _NUMBER_TOKEN.match(s)
        # "42 (rounded)", "5, since ..." or "12 apples": the number; "1, 2, 3" is a list, not its first item.
        if lead and re.match(r"\s*[;(]|\s*,(?!\s*[-+\d])|\s+[A-Za-z]", s[lead.end() :]):
            return lead.group(0)
    exact = re.split(r"\\approx|≈", s, maxsplit=1)[0]  # the value before an approximation of it
    if re.search(r"\d", exact):
        s = exact
    if "=" in s:
        rhs = clean_answer(s.rsplit("=", 1)[1])
        if rhs:
            s = rhs
    return s


def _fallback(window: str, answer_type: AnswerType) -> str | None:
    """Type-specific last resort when there is neither a box nor an answer phrase."""
    if answer_type is AnswerType.MULTIPLE_CHOICE:
        short = clean_answer(window)
        if len(short) <= 40 and normalize_choice(short):
            return normalize_choice(short)
        letters = _LAST_PAREN_LETTER.findall(window)
        return letters[-1] if letters else None
    if answer_type is AnswerType.MULTI_SELECT:
        short = clean_answer(window)
        return normalize_choices(short) if len(short) <= 40 else None
    if answer_type in LABELS:
        words = LABEL_WORDS[answer_type].findall(window)
        return LABELS[answer_type][words[-1].lower()] if words else None
    if answer_type is AnswerType.DYCK:
        for line in reversed(window.splitlines()):
            norm = normalize_dyck(line)
            if norm:
                return norm
        return None
    if answer_type in (AnswerType.NUMERIC, AnswerType.EXPRESSION):
        last = None
        for last in _NUMBER_TOKEN.finditer(window):  # noqa: B007 — keeps the last match
            pass
        return last.group(0) if last else None
    lines = [ln for ln in window.splitlines() if ln.strip()]
    return clean_answer(lines[-1]) if lines else None


def _loose_box(text: str) -> str | None:
    """Dyck answers may hold unbalanced braces (``\\boxed{] } )}``): take up to the last ``}`` on the line."""
    found = _last_box_start(text)
    if found is None:
        return None
    line = text[found[1] : found[1] + MAX_BOX_CHARS].split("\n", 1)[0].lstrip()
    if not line.startswith("{") or "}" not in line[1:]:
        return None
    return line[1 : line.rfind("}")].strip() or None


def extract_answer(text: str, answer_type: AnswerType) -> str | None:
    """The final answer in ``text`` (pass `answer_part` of a response), or None when there is none.

    Categorical types come back canonical (``"C"``, ``"ABD"``, ``"Yes"``, ``"valid"``, ``"] ) }"``);
    numbers and expressions as cleaned text (``"\\\\frac{1}{2}"``, ``"3.2 \\\\text{ m/s}"``). Last resorts
    after box and answer phrase: multiple choice — a lone letter, else the last ``(X)``; labels — the last
    label word; Dyck — the last line made only of brackets; numeric/expression — the last number.

    >>> extract_answer(r"so x = 4, hence \\boxed{x = 4}", AnswerType.NUMERIC)
    '4'
    >>> extract_answer("Thus the answer is (C) Ada.", AnswerType.MULTIPLE_CHOICE)
    'C'
    >>> extract_answer("The sequence closes with ]]", AnswerType.DYCK) is None
    True
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    answer_type = AnswerType(answer_type)
    if answer_type is AnswerType.NUMERIC or answer_type is AnswerType.EXPRESSION:
        plain = plain_boxed_integer(text)
        if plain is not None:
            return plain
    return extract_general(text, answer_type)


def extract_general(text: str, answer_type: AnswerType) -> str | None:
    """`extract_answer` past its argument checks and the plain-boxed-integer shortcut: every answer form."""
    window = text[-MAX_SCAN_CHARS:]
    found = normalizer(answer_type)
    normalize = found[0] if found is not None else None
    candidates: list[tuple[str, bool]] = []
    if answer_type is AnswerType.DYCK:
        # Closing braces inside the box are often unescaped (\boxed{) }}): the balanced scan would stop early.
        loose = _loose_box(text)
        if loose is not None:
            candidates.append((loose, False))
    boxed = last_boxed(text)
    if boxed is not None:
        candidates.append((boxed, False))
    phrase = _phrase_answer(window)
    if phrase is not None:
        candidates.append((phrase, True))

    if normalize is not None:
        for candidate, _ in candidates:
            norm = normalize(candidate)
            if norm is not None:
                return norm
        fallback = _fallback(window, answer_type)
        if fallback is not None:
            return fallback
        return clean_answer(candidates[0][0]) or None if candidates else None

    for candidate, from_phrase in candidates:
        if answer_type is AnswerType.NUMERIC:
            s = _numeric_candidate(candidate, from_phrase=from_phrase)
        else:
            s = clean_answer(candidate)
        if s:
            return s
    return _fallback(window, answer_type)
