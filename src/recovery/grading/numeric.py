"""Fast, exact parsing and comparison of numeric answers (no sympy, no ``eval``).

`parse_numeric` reads the forms models and datasets write for a single number — ``1,234``, ``−2``
(U+2212), ``\\frac{1}{2}``, ``3/4``, ``1.2e-3``, ``1.2 \\times 10^{-3}``, ``10^{5}``, ``50\\%``,
``3.2 \\text{ m/s}`` — into an exact `fractions.Fraction`, so that comparisons never suffer from binary
rounding. Anything else (``2\\sqrt{3}``, ``2^{10}``, ``x + 1``) is *not* a plain number and yields ``None``;
the caller then falls back to math-verify.

Two comparison modes:

* **math-verify compatible** (no tolerance given, `numbers_equal`): integers and fractions must be equal
  exactly; when either side is written with a decimal point, both are rounded to 6 decimal places first.
  This mirrors math-verify's ``verify(float_rounding=6)`` so the fast path and math-verify agree.
* **tolerance** (`parsed_numbers_match` with ``rel_tol``/``abs_tol``; `numbers_match` for plain floats):
  ``math.isclose`` semantics — ``|p - g| <= max(rel_tol * max(|p|, |g|), abs_tol)`` — for datasets whose
  official scorer uses a tolerance (SciBench, JEEBench; see `recovery.grading.grade`). On parsed numbers it
  is evaluated exactly, so ``2.33`` is within ``abs_tol=0.01`` of ``2.32``.

Percent: ``50%`` is read as the number written (``parse_number("50%") == 50.0``) and remembered as a
percentage. In tolerance mode a percentage matches its written value or that value / 100 (SciBench keeps
"%" in the unit field, so ``2.3%`` must match a gold ``2.3``). In math-verify mode it is compared as
math-verify 0.9 compares it (`numbers_equal`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from recovery.grading.braces import balanced

__all__ = [
    "MAX_NUMBER_CHARS",
    "MAX_EXPONENT",
    "ParsedNumber",
    "parse_numeric",
    "numeric_refusal",
    "parse_number",
    "numbers_equal",
    "numbers_match",
    "parsed_numbers_match",
    "unit_tail",
]

#: Longer strings are not a single number; refusing them keeps parsing O(1) on hostile input.
MAX_NUMBER_CHARS = 300
#: Decimal exponents beyond this are refused as unparsable (``1e999999``) instead of being computed.
MAX_EXPONENT = 400
_FLOAT_MAX = Fraction(int(1.7976931348623157e308))
_ROUND_DIGITS = 6  # math-verify's default ``float_rounding``

_MINUS_SIGNS = str.maketrans({c: "-" for c in "\u2212\u2010\u2011\u2012\u2013\ufe63\uff0d"})
# Thousands separators other than a plain comma: LaTeX ``{,}``, thin spaces (``\,``, U+2009, U+202F), NBSP.
_THOUSANDS_SEP = re.compile(r"(?<=\d)(?:\{,\}|\\[, ]|[\u00a0\u2009\u202f\u2007])(?=\d{3}(?!\d))")
_STRIP_COMMANDS = re.compile(r"\\(?:displaystyle|left|right|!|;|:|,|\s)")
_OUTER_WRAPPER = re.compile(r"^\\(?:text|textbf|textrm|mathrm|mathbf|boxed|fbox|mbox)\s*\{(.*)\}$", re.DOTALL)

_PLAIN = re.compile(r"\s*([-+]?)(\d{1,300})(?:\.(\d*))?\s*")
_LEADING_APPROX = re.compile(r"^(?:\\approx|≈|~|=)\s*")
_DEC = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+"
_POW10 = r"10\s*\^\s*(?:\{\s*(?P<NAME>[-+]?\d+)\s*\}|(?P<NAMEb>[-+]?\d+))"
_HEAD = re.compile(
    r"(?P<sign>[-+])?\s*(?:"
    # \frac{a}{b} (also \dfrac, \tfrac: normalised before matching); a and b may carry a sign.
    r"\\frac\s*\{\s*(?P<fn>[-+]?\s*(?:" + _DEC + r"))\s*\}\s*\{\s*(?P<fd>[-+]?\s*(?:" + _DEC + r"))\s*\}"
    r"|\\frac\s*(?P<sn>\d)(?P<sd>\d)"  # \frac12
    r"|"
    + _POW10.replace("NAME", "p")  # 10^{5}
    + r"|(?P<rn>"
    + _DEC
    + r")\s*/\s*(?P<rd>"
    + _DEC
    + r")"  # 3/4
    r"|(?P<m>" + _DEC + r")(?:[eE](?P<e>[-+]?\d+))?"  # 1.2, 1.2e-3
    r"(?:\s*(?:\\times|\\cdot|×|·|\*|x)\s*" + _POW10.replace("NAME", "q") + r")?"  # 1.2 \times 10^{-3}
    r")\s*(?P<pct>%)?"
)

# What may follow a number and still be "a unit": words, \text{}/\mathrm{} groups, exponents, /, ·, °.
_UNIT_COMMANDS = re.compile(
    r"\\(?:text|textrm|textit|textbf|mathrm|mathit|mathbf|rm|operatorname|mbox|hat|unit|mathring)\b"
    r"|\\(?:mu|Omega|ohm|circ|degree|AA|cdot|quad|qquad)\b|\\[%$,;:!\s]"
)
_UNIT_SYMBOLS = {"\\mu": "µ", "\\Omega": "Ω", "\\ohm": "Ω", "\\circ": "°", "\\degree": "°", "\\AA": "Å"}
_DEGREE_PREFIX = re.compile(r"^(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree)")
_UNIT_EXPONENT = re.compile(r"\^\s*-?\s*\d+")
_UNIT_CHARS = re.compile(r"^[^\W\d_]*(?:[\s/.\-·°%$'^][^\W\d_]*)*$")  # letters joined by unit punctuation
# A lone lowercase symbol after a number is a variable or constant, not a unit: "2x", "3 e", "4 pi"
# (units written as one lowercase letter, m s g h, stay allowed; capitals are units: N, J, K, C, V).
_NOT_UNITS = frozenset("x y z n k i j e a b c d f p q r t u v w pi".split())
_NOT_UNIT_WORDS = frozenset(
    "and or plus minus times over divided squared cubed to if when where but with mod modulo".split()
)


@dataclass(frozen=True, slots=True)
class ParsedNumber:
    """A number read from text: its exact value and how it was written.

    ``is_float`` is True when a decimal point or ``e`` exponent was written (math-verify then compares
    rounded values); ``percent`` when a ``%`` (or the word "percent") followed it.
    """

    value: Fraction
    is_float: bool = False
    percent: bool = False

    def candidates(self) -> tuple[Fraction, ...]:
        """The values this number may stand for: ``50%`` is 50 or 1/2."""
        return (self.value, self.value / 100) if self.percent else (self.value,)

    def __float__(self) -> float:
        return float(self.value)


def _decimal(text: str) -> tuple[Fraction, bool] | None:
    """Exact value of a decimal literal (commas are thousands separators) and whether it has a point."""
    text = text.replace(",", "").replace(" ", "")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    whole, dot, frac = text.partition(".")
    if not (whole or frac):
        return None
    value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    return sign * value, bool(frac)  # "7." is the integer 7, as in math-verify


class _Refused(Exception):
    """The text is shaped like a number but its value is refused (absurd exponent, division by zero)."""


def _pow10(exponent: str | None) -> Fraction:
    if exponent is None:
        return Fraction(1)
    e = int(exponent.replace(" ", ""))
    if abs(e) > MAX_EXPONENT:
        raise _Refused(f"exponent {e} beyond ±{MAX_EXPONENT}")
    return Fraction(10) ** e


def _clean(text: str) -> str:
    text = text.translate(_MINUS_SIGNS).strip()
    text = text.replace("\\$", " ").replace("$", " ").replace("\\%", "%")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _THOUSANDS_SEP.sub("", text)
    text = _STRIP_COMMANDS.sub(" ", text).strip()
    for _ in range(3):  # peel \text{...}, \boxed{...}, {...} wrappers around the whole string
        match = _OUTER_WRAPPER.match(text)
        if match and balanced(match.group(1)):
            text = match.group(1).strip()
        elif text.startswith("{") and text.endswith("}") and balanced(text[1:-1]):
            text = text[1:-1].strip()
        elif text.startswith("(") and text.endswith(")") and "(" not in text[1:-1] and "," not in text:
            text = text[1:-1].strip()
        else:
            break
    text = _LEADING_APPROX.sub("", text)
    return text.rstrip(".").strip()


def unit_tail(tail: str) -> tuple[bool, bool]:
    """Whether ``tail`` (what follows the number) reads as a unit, and whether it marks a percentage."""
    t = tail.strip().rstrip(".").strip()
    if not t:
        return True, False
    if re.fullmatch(r"(?:%|percent|per\s*cent)", t, re.IGNORECASE):
        return True, True
    t = _DEGREE_PREFIX.sub(" ", t).strip()
    if not t:
        return True, False
    if t[0] in "^_!+-*/=<>([,;:|'\"&" or t[0].isdigit():
        return False, False  # an operator, a power, a list or a second number: not a unit
    percent = "%" in t
    t = _UNIT_COMMANDS.sub(lambda m: _UNIT_SYMBOLS.get(m.group(0), " "), t)
    if "\\" in t:
        return False, False  # \pi, \sqrt, \frac ...: mathematics, not a unit
    t = _UNIT_EXPONENT.sub("^", t.replace("{", " ").replace("}", " ").replace("~", " "))
    t = " ".join(t.split())
    if not t:
        return True, percent
    if not _UNIT_CHARS.match(t):
        return False, False
    if t in _NOT_UNITS or t.split()[0].lower() in _NOT_UNIT_WORDS:
        return False, False
    return True, percent


def _parse(text: str) -> ParsedNumber | str | None:
    """A ParsedNumber; a reason (str) when the text is a number whose value is refused; else None."""
    if len(text) > MAX_NUMBER_CHARS:
        return None
    plain = _PLAIN.fullmatch(text)
    if plain is not None:  # fast path for the commonest case, "12" / "-3.5"
        sign, whole, frac = plain.groups()
        value = Fraction(int(whole + frac), 10 ** len(frac)) if frac else Fraction(int(whole))
        return ParsedNumber(-value if sign == "-" else value, bool(frac))  # "7." is the integer 7
    text = _clean(text)
    match = _HEAD.match(text)
    if match is None:
        return None
    is_unit, tail_percent = unit_tail(text[match.end() :])
    if not is_unit:
        return None
    g = match.groupdict()
    try:
        if g["fn"] is not None or g["rn"] is not None:
            top, bottom = ("fn", "fd") if g["fn"] is not None else ("rn", "rd")
            num, den = _decimal(g[top]), _decimal(g[bottom])
            if num is None or den is None:
                return None
            if den[0] == 0:
                raise _Refused("division by zero")
            value, is_float = num[0] / den[0], num[1] or den[1]
        elif g["sn"] is not None:
            if g["sd"] == "0":
                raise _Refused("division by zero")
            value, is_float = Fraction(int(g["sn"]), int(g["sd"])), False
        elif g["p"] is not None or g["pb"] is not None:
            value, is_float = _pow10(g["p"] if g["p"] is not None else g["pb"]), False
        else:
            mantissa = _decimal(g["m"])
            if mantissa is None:
                return None
            value, is_float = mantissa[0], mantissa[1] or g["e"] is not None
            power = g["q"] if g["q"] is not None else g["qb"]
            if g["e"] is not None or power is not None:
                value = value * _pow10(g["e"]) * _pow10(power)
    except _Refused as exc:
        return str(exc)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    if abs(value) > _FLOAT_MAX:
        return "beyond the float range"  # refuse rather than carry an absurd magnitude around
    if g["sign"] == "-":
        value = -value
    return ParsedNumber(value, bool(is_float), bool(g["pct"]) or tail_percent)


def _parse_str(text: str) -> ParsedNumber | str | None:
    """`_parse` for an argument that must be a str (``TypeError`` otherwise)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return _parse(text)


def numeric_refusal(text: str) -> str | None:
    """Why ``text``, although written as a number, has no usable value (``1e999999``, ``1/0``); else None.

    >>> numeric_refusal("1e999999"), numeric_refusal("12"), numeric_refusal("x + 1")
    ('exponent 999999 beyond ±400', None, None)
    """
    result = _parse_str(text)
    return result if isinstance(result, str) else None


def parse_numeric(text: str) -> ParsedNumber | None:
    """Parse one number written in plain text or LaTeX; ``None`` when ``text`` is not a single number.

    >>> parse_numeric("89,034.79")
    ParsedNumber(value=Fraction(8903479, 100), is_float=True, percent=False)
    >>> parse_numeric("\\\\frac{1}{2}").value, parse_numeric("50\\\\%").percent
    (Fraction(1, 2), True)
    >>> parse_numeric("2\\\\sqrt{3}") is None
    True
    """
    result = _parse_str(text)
    return result if isinstance(result, ParsedNumber) else None


def parse_number(text: str) -> float | None:
    """`parse_numeric` as a float (``50%`` → ``50.0``; see the module docstring for percent matching).

    >>> parse_number("1,234"), parse_number("\\u22122"), parse_number("1.2 \\\\times 10^{-3}")
    (1234.0, -2.0, 0.0012)
    >>> parse_number("3.2 \\\\text{ m/s}"), parse_number("1e999999")
    (3.2, None)
    """
    parsed = parse_numeric(text)
    return None if parsed is None else float(parsed.value)


def _round(value: Fraction, is_float: bool) -> Fraction:
    # sympy rounds a Float's binary value; round the same double so exact ties break the same way.
    if is_float:
        value = Fraction(float(value))
    return round(value, _ROUND_DIGITS)


def numbers_equal(pred: ParsedNumber, gold: ParsedNumber) -> bool:
    """math-verify compatible equality: exact for integers/fractions, 6 decimals when either is a decimal.

    A percentage is compared as math-verify 0.9 compares it (its LaTeX reader makes ``X%`` the product of
    ``X`` and an unevaluated 1/100): two integers, either a percentage, are equal when the numbers written
    are (``50% == 50``) or their values are (``100% == 1``); otherwise the value, ``X/100``, is compared,
    rounded to 6 decimals when either side is a decimal (``50% == 0.5``, ``2.5% == 0.025``, ``2.5% != 2.5``,
    ``50% != 50.0``).

    >>> numbers_equal(parse_numeric("0.333333"), parse_numeric("\\\\frac{1}{3}"))
    True
    >>> numbers_equal(parse_numeric("50"), parse_numeric("50%")), numbers_equal(parse_numeric("0.5"), parse_numeric("50%"))
    (True, True)
    >>> numbers_equal(parse_numeric("50.0"), parse_numeric("50%")), numbers_equal(parse_numeric("2.5"), parse_numeric("2.5%"))
    (False, False)
    """
    p_float, g_float = pred.is_float, gold.is_float
    p, g = _value(pred), _value(gold)
    if p == g:
        return True
    if p_float or g_float:
        return _round(p, p_float) == _round(g, g_float)
    written_integers = pred.value.denominator == 1 and gold.value.denominator == 1
    return written_integers and pred.value == gold.value


def _value(number: ParsedNumber) -> Fraction:
    """The value math-verify gives a number: a percentage is its number / 100."""
    return number.value / 100 if number.percent else number.value


def numbers_match(pred: float, gold: float, *, rel_tol: float, abs_tol: float) -> bool:
    """``math.isclose(pred, gold, rel_tol=rel_tol, abs_tol=abs_tol)`` for finite numbers.

    The relative tolerance is taken of the larger magnitude, as SciBench's scorer does with ``math.isclose``.
    Non-finite values never match; negative tolerances raise ``ValueError``.

    >>> numbers_match(104.0, 100.0, rel_tol=0.05, abs_tol=0.0), numbers_match(0.12, 0.11, rel_tol=0, abs_tol=0.01)
    (True, True)
    >>> numbers_match(106.0, 100.0, rel_tol=0.05, abs_tol=0.0)
    False
    """
    for name, tol in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol >= 0 or math.isinf(tol):
            raise ValueError(f"{name} must be a finite number ≥ 0, got {tol!r}")
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return False
    return math.isclose(pred, gold, rel_tol=rel_tol, abs_tol=abs_tol)


def parsed_numbers_match(
    pred: ParsedNumber, gold: ParsedNumber, *, rel_tol: float | None = None, abs_tol: float | None = None
) -> bool:
    """Compare two parsed numbers: with tolerances when either is given, else `numbers_equal`.

    Tolerances follow ``math.isclose`` (relative to the larger magnitude) but are applied exactly.

    >>> parsed_numbers_match(parse_numeric("2.33"), parse_numeric("2.32"), abs_tol=0.01)
    True
    """
    if rel_tol is None and abs_tol is None:
        return numbers_equal(pred, gold)
    for name, value in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        if value is not None and not (isinstance(value, (int, float)) and 0 <= value < math.inf):
            raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}")
    # Exact arithmetic, with the tolerances read as the decimals they were written as: 2.33 vs 2.32 is
    # within abs_tol=0.01 (in floats |Δ| = 0.010000000000000231 would fail it).
    rel = Fraction(repr(float(rel_tol or 0.0)))
    tol = Fraction(repr(float(abs_tol or 0.0)))
    return any(abs(p - g) <= max(rel * max(abs(p), abs(g)), tol) for p in pred.candidates() for g in gold.candidates())
