"""Answer cleaning and the normalisers of the categorical answer types.

`clean_answer` strips what surrounds an answer (markdown, math delimiters, ``\\text{}`` wrappers); the
normalisers read one canonical value from a cleaned or raw answer: an option letter, a set of letters, a
label (yes/no, true/false, valid/invalid), a Dyck closing sequence, or case-folded text. `normalizer`
names the one an answer type is compared with, for extraction and comparison alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from recovery.grading.braces import balanced
from recovery.types import AnswerType

__all__ = [
    "LABELS",
    "LABEL_WORDS",
    "clean_answer",
    "normalize_choice",
    "normalize_choices",
    "normalize_dyck",
    "normalize_exact",
    "normalize_label",
    "normalizer",
]

_WRAPPER = re.compile(r"^\\(?:text|textbf|textrm|textit|mathrm|mathbf|emph|mbox|boxed|fbox)\s*\{(.*)\}$", re.DOTALL)
_CLEAN_EDGE = frozenset(" \t\r\n*_`\\.,;:$")
_CHOICE = re.compile(r"^\(?\s*([A-J])\s*\)?(?![A-Za-z0-9])")
_CHOICE_WORDS = re.compile(r"(?i)\b(?:options?|choices?|answers?|and|or)\b|&|\\text|\\textbf|\\mathrm")
#: The canonical label of each label word, by answer type.
LABELS: Mapping[AnswerType, Mapping[str, str]] = {
    AnswerType.YES_NO: {"yes": "Yes", "no": "No"},
    AnswerType.TRUE_FALSE: {"true": "True", "false": "False"},
    AnswerType.VALID_INVALID: {"valid": "valid", "invalid": "invalid"},
}
#: The label words of each label type as a pattern (whole words, any case).
LABEL_WORDS: Mapping[AnswerType, re.Pattern[str]] = {
    t: re.compile(r"(?i)\b(" + "|".join(sorted(m, key=len, reverse=True)) + r")\b") for t, m in LABELS.items()
}
_DYCK_ESCAPES = (
    ("\\{", "{"),
    ("\\}", "}"),
    ("\\rangle", ">"),
    ("\\langle", "<"),
    ("\\lt", "<"),
    ("\\gt", ">"),
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("\\left", ""),
    ("\\right", ""),
    ("\\", ""),
)
_DYCK_CHARS = frozenset("()[]{}<>")


def clean_answer(text: str) -> str:
    """Strip what surrounds an answer: markdown, ``$``/``\\(``, ``\\text{}`` wrappers, a trailing period.

    >>> clean_answer(r"**$\\text{(C)}$**.")
    '(C)'
    """
    if text and text[0] not in _CLEAN_EDGE and text[-1] not in _CLEAN_EDGE and "$" not in text:
        return text  # nothing to strip (the common case for short answers; keeps grading fast)
    s = re.sub(r"(?<!\\)\$", "", text)
    for _ in range(5):
        before = s
        s = s.strip()
        for mark in ("**", "__", "`"):  # markdown emphasis around the answer (not "10**3" inside it)
            if s.startswith(mark):
                s = s[len(mark) :]
            if s.endswith(mark):
                s = s[: -len(mark)]
        s = s.strip()
        for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
            if s.startswith(open_) and s.endswith(close):
                s = s[len(open_) : -len(close)].strip()
        s = s.rstrip(".,;:").strip()  # not "!": "5!" is a factorial
        match = _WRAPPER.match(s)
        if match and balanced(match.group(1)):
            s = match.group(1)
        if s == before:
            break
    return s


def normalize_choice(text: str) -> str | None:
    """One option letter A–J from ``(C)``, ``C``, ``C.``, ``Option C``, ``(C) Ada finished third``.

    >>> normalize_choice("(D)"), normalize_choice("Option C"), normalize_choice("AB")
    ('D', 'C', None)
    """
    s = clean_answer(text)
    s = re.sub(r"(?i)^(?:the\s+)?(?:correct\s+)?(?:option|choice|answer)\s*(?:is\s*)?[:\-]?\s*", "", s).strip()
    s = s.lstrip("{").strip()
    match = _CHOICE.match(s)
    return match.group(1) if match else None


def normalize_choices(text: str) -> str | None:
    """A set of option letters, sorted and joined: ``A, B and D`` / ``(A)(D)`` / ``ABD`` → ``ABD``.

    >>> normalize_choices("(B), (A) and (D)"), normalize_choices("BC"), normalize_choices("E or maybe")
    ('ABD', 'BC', None)
    """
    s = _CHOICE_WORDS.sub(" ", clean_answer(text))
    s = re.sub(r"[\s,;/+(){}\[\]]", "", s)
    if not s or len(s) > 10 or not re.fullmatch(r"[A-J]+", s):
        return None
    return "".join(sorted(set(s)))


def normalize_label(text: str, answer_type: AnswerType) -> str | None:
    """The canonical label (``Yes``/``No``, ``True``/``False``, ``valid``/``invalid``) named in ``text``.

    A label at the start wins; otherwise the last label word in the text.

    >>> normalize_label("**Yes**, because ...", AnswerType.YES_NO)
    'Yes'
    >>> normalize_label("the argument is deductively invalid", AnswerType.VALID_INVALID)
    'invalid'
    """
    labels = LABELS[AnswerType(answer_type)]
    s = clean_answer(text)
    words = LABEL_WORDS[AnswerType(answer_type)].findall(s)
    if not words:
        return None
    first = re.match(r"\W*(\w+)", s)
    if first and first.group(1).lower() in labels:
        return labels[first.group(1).lower()]
    return labels[words[-1].lower()]


def normalize_dyck(text: str) -> str | None:
    """A closing-bracket sequence in BBH's spacing (``]]`` and ``] ]`` both give ``] ]``).

    >>> normalize_dyck(r"$\\}\\rangle ]$"), normalize_dyck("] ) }."), normalize_dyck("none")
    ('} > ]', '] ) }', None)
    """
    s = clean_answer(text)
    for old, new in _DYCK_ESCAPES:
        s = s.replace(old, new)
    s = re.sub(r"[\s,]", "", s)
    if not s or not set(s) <= _DYCK_CHARS:
        return None
    return " ".join(s)


def normalize_exact(text: str) -> str:
    """Cleaned, case-folded, whitespace-collapsed text for `AnswerType.EXACT` comparison."""
    return " ".join(clean_answer(text).casefold().split())


def normalizer(answer_type: AnswerType) -> tuple[Callable[[str], str | None], str] | None:
    """The normaliser of a categorical answer type and what it reads, as verdict details name it (``"an
    option letter"``); None for the types read as numbers, expressions or free text.

    >>> normalizer(AnswerType.TRUE_FALSE)[1], normalizer(AnswerType.NUMERIC)
    ('a true/false', None)
    """
    if answer_type is AnswerType.MULTIPLE_CHOICE:
        return normalize_choice, "an option letter"
    if answer_type is AnswerType.MULTI_SELECT:
        return normalize_choices, "a set of option letters"
    if answer_type in LABELS:
        return (lambda s: normalize_label(s, answer_type)), "a " + answer_type.value.replace("_", "/")
    if answer_type is AnswerType.DYCK:
        return normalize_dyck, "a closing-bracket sequence"
    return None
