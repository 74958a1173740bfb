"""Which reader decides a math answer: math-verify's, on the text as written, or a fast one that provably
reads the same value.

math-verify (``parse`` of the gold and of the response, then ``verify``) is the reference for answers
written as LaTeX: its extraction decides which of several boxes, "final answer" sentences, relations,
intervals, matrices, approximations and escaped amounts is the answer. Re-implementing that reading is how a
grader drifts into false positives, so a text holding LaTeX math is handed to math-verify whole
(`has_math_markup`), except where the answer is a number math-verify reads one way only:

- `single_box_number`: the text's one and only box holds a plain number and nothing after it could be
  read as a later answer (no digit, no math, no "I hope" sentence): math-verify's boxed match is then the
  answer, whatever else the text says;
- `plain_answer_first`: math-verify's plain-text reader takes a number before any LaTeX reading (a
  "final answer" sentence, or text without LaTeX math). Its own extraction patterns pick the match, as
  regular expressions only: math-verify would evaluate the match with sympy's ``parse_expr``, and model
  text is never evaluated, so the number is read here (`plain_decimal_comma`: ``0,5`` is a decimal,
  ``1,234`` a thousands separator).

`simple_number` says which gold answers the fast comparison may take: an integer, a decimal, a fraction of
integers or a comma-grouped integer, no percent sign or other separator.
"""

from __future__ import annotations

import functools
import re

from recovery.grading.numeric import parse_numeric, unit_tail

__all__ = [
    "plain_answer_first",
    "join_thin_space_groups",
    "has_math_markup",
    "has_latex_command",
    "plain_decimal_comma",
    "simple_number",
    "single_box_number",
]

# Math between $ signs (as math-verify pairs them: not after a backslash or a digit, one line), $$, \( or \[
# opening math, or a box: what math-verify's LaTeX extraction finds. A lone "$5" is a currency sign.
_MATH_MARKUP = re.compile(r"(?<![\\\d])\$(?:\\\$|[^\n$])+?(?<!\\)\$|\$\$|\\\(|\\\[|\\boxed|\\fbox")
_MATH_DELIMITER = re.compile(r"(?<!\\)\$|\\[()\[\]]")
# A dollar sign opening a line break: math written across lines (which math-verify's inline reading refuses).
_BROKEN_INLINE = re.compile(r"(?<!\\)\$[ \t]*\n")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]")
#: A number math-verify and the fast comparison read alike: an integer or a decimal, no separators.
_SIMPLE = re.compile(r"-?\d{1,300}(?:\.\d{1,300})?")
_SIMPLE_FRACTION = re.compile(r"-?(?:\\[dt]?frac\{\d{1,50}\}\{\d{1,50}\}|\d{1,50}/\d{1,50})")
# Integers grouped in threes by commas (1,234): math-verify's LaTeX reader takes the commas as separators.
_GROUPED = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+")
_BOX_CONTENT = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]{0,50}\}){1,64})\}")
_AFTER_BOX_END = re.compile(r"[\s$.,;:!*)\]\\]*")
_HOPE = re.compile(r"(?i)I\s+hope")
# "1,22" or "0,5": one comma between digits that is not a thousands separator.
_DECIMAL_COMMA = re.compile(r"(-?\d+),(\d+)")


_THIN_SPACE_GROUP = re.compile(r"(?<=\d)\\,(?=\d{3}(?!\d))")


def join_thin_space_groups(text: str) -> str:
    """``text`` with LaTeX thin spaces between digit groups removed (``1\\,250`` → ``1250``): math-verify
    0.9 reads ``$1\\,250$`` as 251, a deliberate departure (docs/grading.md).

    >>> join_thin_space_groups(r"$1\\,250\\,000$ and $a\\,b$")
    '$1250000$ and $a\\\\,b$'
    """
    return _THIN_SPACE_GROUP.sub("", text)


def has_math_markup(text: str) -> bool:
    """Whether ``text`` holds LaTeX math that math-verify's extraction looks for (``$…$``, ``\\(…\\)``,
    ``\\[…\\]``, ``\\boxed``/``\\fbox``).

    >>> has_math_markup(r"so $x=2$"), has_math_markup(r"costs \\$5"), has_math_markup("costs $5 or 6"), has_math_markup("12.")
    (True, False, False, False)
    """
    return _MATH_MARKUP.search(text) is not None or _BROKEN_INLINE.search(text) is not None


def has_latex_command(text: str) -> bool:
    """Whether ``text`` uses a LaTeX command (``\\frac``, ``\\sqrt``, ``\\begin``), delimiters or not."""
    return _LATEX_COMMAND.search(text) is not None


def simple_number(text: str) -> str | None:
    """``text`` (stripped, outer ``$`` removed) when it is a plain integer, decimal or integer fraction, or
    an integer grouped by commas (without them), the forms math-verify and `recovery.grading.numeric` read as
    the same number; else None.

    >>> simple_number("$-12$"), simple_number(r"\\frac{1}{2}"), simple_number("1,234"), simple_number("50\\\\%")
    ('-12', '\\\\frac{1}{2}', '1234', None)
    """
    s = text.strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    return _plain_number(s)


def _plain_number(s: str) -> str | None:
    """``s`` when it is an integer, a decimal or a fraction of integers; a comma-grouped integer without its
    commas (math-verify takes them as separators); else None."""
    if _SIMPLE.fullmatch(s) or _SIMPLE_FRACTION.fullmatch(s):
        return s
    if _GROUPED.fullmatch(s):
        return s.replace(",", "")
    return None


def single_box_number(text: str) -> str | None:
    """The number in ``text``'s only box, when math-verify's reading of ``text`` is that number; else None.

    It is when the box is the only one (a second box makes math-verify read a set or the later box), holds
    an integer, a decimal, a fraction of integers or a comma-grouped integer, no percent sign follows it,
    and nothing after it could be a later answer: no digit and no math in the rest of the text, and no
    "I hope" sentence anywhere (math-verify's first rule reads "The final answer is X. I hope it is correct." before boxes).
    The comma-grouped integer comes back without its commas.

    >>> single_box_number(r"So \\(\\boxed{12}\\)."), single_box_number(r"\\boxed{2} and \\boxed{-3}")
    ('12', None)
    >>> single_box_number(r"\\boxed{1,234}"), single_box_number(r"\\boxed{7}, which is 12 less than 19")
    ('1234', None)
    """
    start = text.find("\\boxed{")
    if start < 0 or text.find("\\boxed", start + 1) >= 0 or "\\fbox" in text:
        return None
    match = _BOX_CONTENT.match(text, start)
    if match is None:
        return None
    number = _plain_number(match.group(1).strip())
    if number is None:
        return None
    tail = text[match.end() :]
    close = _AFTER_BOX_END.match(tail)
    rest = tail[close.end() :] if close else tail
    if tail.lstrip(" $\\)").startswith("%") or re.search(r"\d|(?<!\\)\$|\\[(\[]|%", rest):
        return None
    if _HOPE.search(text):
        return None
    return number


def plain_decimal_comma(text: str) -> str:
    """A number written with a decimal comma, as math-verify's plain-text reader reads it: ``0,5`` →
    ``0.5``, ``1000,99`` → ``1000.99``; a thousands separator (``1,234``, a first group of one to three
    digits not starting with 0, then groups of three) stays as it is.

    >>> plain_decimal_comma("0,5"), plain_decimal_comma("1,22"), plain_decimal_comma("1,234"), plain_decimal_comma("x")
    ('0.5', '1.22', '1,234', 'x')
    """
    s = text.strip()
    if _GROUPED.fullmatch(s):
        return s
    match = _DECIMAL_COMMA.fullmatch(s)
    return f"{match.group(1)}.{match.group(2)}" if match else text


#: math-verify's priorities of its "final answer" sentences and boxes: the readings a response holding LaTeX
#: math is read by even when they are plain text.
ANCHORED_PRIORITY = 50
_BARE = 300  # math-verify's priority of a number or expression found with no answer sentence


def plain_answer_first(text: str, *, beside_latex: bool = False) -> str | None:
    """The number (or digits-and-operators expression) math-verify's plain-text reader takes from ``text``
    when that reading comes before any of its LaTeX readings; None when a LaTeX reading comes first (or
    there is none).

    math-verify reads a response with both readers and keeps the first match by priority (a "final answer
    is ... I hope it is correct" sentence, then boxes and "final answer ... is", then "answer", then any
    math), the rightmost one among equals. Its own extraction patterns are used here, as regular
    expressions only: the plain-text match is not evaluated (math-verify would run sympy's ``parse_expr``
    on it); the caller reads the number. A text whose answer is plain ("Final Answer: The volume of $V$ is
    120. I hope it is correct.") is then read as math-verify reads it, which its LaTeX reader alone misses.
    With ``beside_latex`` (a response holding LaTeX math), a plain reading other than a "final answer"
    sentence's is taken only after the last math delimiter: a number inside math that math-verify's LaTeX
    reader refuses (inline math broken across lines, ``$ \\n 9 \\n $``) is not read as plain text.

    >>> plain_answer_first("The volume of $V$ is 120. Final Answer: The final answer is 120. I hope it is correct.")
    '120'
    >>> plain_answer_first(r"We get $x = 3$, so the answer is \\boxed{3}.") is None
    True
    """
    best = None
    for priority, group in _extraction_groups():
        found = [(m.end(), -m.start(), is_plain, m) for pattern, is_plain in group for m in pattern.finditer(text)]
        if found:
            best = max(found, key=lambda item: item[:2])
            plain_beside_math = beside_latex and best[2] and priority > ANCHORED_PRIORITY
            if plain_beside_math and _MATH_DELIMITER.search(text, best[3].start()):
                return None
            break
    if best is None or not best[2]:
        return None
    match = best[3]
    number = _plain_match_text(match)
    if number is None:
        return None
    if match.groupdict().get("expr") and priority == _BARE and parse_numeric(number) is None:
        return None  # bare arithmetic ("let me redo 7 + 5") is a step, not an answer; "2/3" is a number
    # What math-verify's plain reader ignores after the number: a unit is fine ("1,000.99m²", "12 apples."),
    # "\\%" makes it a percentage, anything else ("2\\sqrt{3}", "2x", "10^{5}", "5!") means this number is
    # not the answer, and the reading falls to this project's rules (math-verify would read "2").
    named = [name for name, value in match.groupdict().items() if value and name != "percent"]
    start, end = min(match.start(name) for name in named), max(match.end(name) for name in named)
    # Inside an expression ("x^2 + 1", "2 \\cdot 3"), or the first item of a list ("1, 2, 3, ..."), a number
    # is not the answer.
    if re.search(r"(?:[-+*/^×÷(\\_{]|\\[A-Za-z]+)\s*$", text[:start]) or re.match(r"\s*,\s*[-+]?\d", text[end:]):
        return None
    written = plain_decimal_comma(text[start:end]) + ("%" if number.endswith("%") else "")
    if _same_number(written, number):
        number = written  # as written ("1,234", "007"), when it reads alike
    word = re.match(r"[^\s,;:?]*", text[end:]).group(0).strip("$€£¥₹")
    if word.startswith("\\%"):
        return number if number.endswith("%") else number + "%"
    is_unit, _ = unit_tail(word)
    return number if is_unit else None


def _plain_match_text(match: re.Match) -> str | None:
    """The number or expression a math-verify plain-text match holds, as text (separators removed, a decimal
    comma made a point, a percent sign kept)."""
    groups = match.groupdict()
    integer = next((v for k, v in groups.items() if k.startswith("integer") and v), "")
    decimal = next((v for k, v in groups.items() if k.startswith("decimal") and v), "")
    if integer or decimal:
        digits = integer.replace(",", "").replace(" ", "")
        sign = "-" if digits.startswith("-") else ""
        digits = digits.lstrip("-").lstrip("0") or "0"
        return f"{sign}{digits}{decimal.replace(',', '.')}" + ("%" if groups.get("percent") else "")
    expr = groups.get("expr")
    if not expr:
        return None
    return expr.strip().rstrip(".").replace("×", "\\times ").replace("÷", "\\div ")


def _same_number(a: str, b: str) -> bool:
    parsed_a, parsed_b = parse_numeric(a), parse_numeric(b)
    return parsed_a is not None and parsed_a == parsed_b


@functools.cache
def _extraction_groups() -> list:
    """math-verify's extraction patterns for its default call (LaTeX and plain text), grouped by priority:
    each (priority, [(compiled pattern, whether it is a plain-text pattern)]). Built on first use."""
    from math_verify.parser import (  # lazy: the fast paths never import sympy
        ExprExtractionConfig,
        LatexExtractionConfig,
        lazy_expr_regex,
        lazy_latex_regex,
    )

    by_priority: dict[int, list] = {}
    for pattern, priority in lazy_latex_regex(LatexExtractionConfig()):
        by_priority.setdefault(priority, []).append((pattern, False))
    for pattern, priority in lazy_expr_regex(ExprExtractionConfig()):
        by_priority.setdefault(priority, []).append((pattern, True))
    return [(p, by_priority[p]) for p in sorted(by_priority)]
