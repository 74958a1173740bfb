"""Which reader decides a math answer: math-verify's, on the text as written, or a fast one that provably
reads the same value.

math-verify (``parse`` of the gold and of the response, then ``verify``) is the reference for answers
written as LaTeX: its extraction decides which of several boxes, "final answer" sentences, relations,
intervals, matrices, approximations and escaped amounts is the answer. Re-implementing that reading is how a
grader drifts into false positives, so a text holding LaTeX math is handed to math-verify whole
(`has_math_markup`), with two exceptions read here because math-verify reads them one way only:

- `single_box_number`: the text's one and only box holds a plain number and nothing after it could be
  read as a later answer (no digit, no math, no "I hope" sentence): math-verify's boxed match is then the
  answer, whatever else the text says;
- `simple_number`: a gold answer (or a whole answer) that is an integer, a decimal or a fraction of
  integers, written without separators or a percent sign.

Text with no LaTeX math at all is read by the project (`recovery.grading.extract`): math-verify reads such
text with sympy's ``parse_expr``, which evaluates it, and model text is never evaluated. The numbers are
read as math-verify's plain-text reader reads them (`plain_decimal_comma`: ``0,5`` is a decimal, ``1,234``
a thousands separator). Percentages are always left to math-verify, whose rule depends on how both sides
are written.
"""

from __future__ import annotations

import re

__all__ = [
    "join_thin_space_groups",
    "has_math_markup",
    "has_latex_command",
    "plain_decimal_comma",
    "simple_number",
    "single_box_number",
]

# Unescaped dollar, \( or \[ opening inline/display math, or a box: math-verify's LaTeX extraction finds these.
_MATH_MARKUP = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")
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

    >>> has_math_markup(r"so $x=2$"), has_math_markup(r"costs \\$5"), has_math_markup("The answer is 12.")
    (True, False, False)
    """
    return _MATH_MARKUP.search(text) is not None


def has_latex_command(text: str) -> bool:
    """Whether ``text`` uses a LaTeX command (``\\frac``, ``\\sqrt``, ``\\begin``), delimiters or not."""
    return _LATEX_COMMAND.search(text) is not None


def simple_number(text: str) -> str | None:
    """``text`` (stripped, outer ``$`` removed) when it is a plain integer, decimal or integer fraction,
    the forms math-verify and `recovery.grading.numeric` read as the same number; else None.

    >>> simple_number("$-12$"), simple_number(r"\\frac{1}{2}"), simple_number("1,234"), simple_number("50\\\\%")
    ('-12', '\\\\frac{1}{2}', None, None)
    """
    s = text.strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    if _SIMPLE.fullmatch(s) or _SIMPLE_FRACTION.fullmatch(s):
        return s
    return None


def single_box_number(text: str) -> str | None:
    """The number in ``text``'s only box, when math-verify's reading of ``text`` is that number; else None.

    It is when the box is the only one (a second box makes math-verify read a set or the later box), holds
    an integer, a decimal, a fraction of integers or a comma-grouped integer, no percent sign follows it, and nothing after it
    could be a later answer: no digit and no math in the rest of the text, and no "I hope" sentence
    anywhere (math-verify's first rule reads "The final answer is X. I hope it is correct." before boxes).
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
    content = match.group(1).strip()
    if _SIMPLE.fullmatch(content) or _SIMPLE_FRACTION.fullmatch(content):
        number = content
    elif _GROUPED.fullmatch(content):
        number = content.replace(",", "")
    else:
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
