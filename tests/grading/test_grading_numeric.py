"""recovery.grading.numeric: exact number parsing and the two comparison modes."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.grading.numeric import (
    MAX_EXPONENT,
    MAX_NUMBER_CHARS,
    ParsedNumber,
    numbers_equal,
    numbers_match,
    numeric_refusal,
    parse_number,
    parse_numeric,
    parsed_numbers_match,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12", 12.0),
        ("-3.5", -3.5),
        ("+65.49", 65.49),
        (".5", 0.5),
        ("7.", 7.0),
        ("1,234", 1234.0),
        ("89,034.79", 89034.79),
        ("1{,}234.5", 1234.5),
        ("1\\,234", 1234.0),
        ("1\u202f234", 1234.0),
        ("\u22122", -2.0),  # U+2212 minus, as in SciBench diff.json
        ("\u22121.642876", -1.642876),
        ("\u20133", -3.0),  # en dash used as a minus
        ("\\frac{1}{2}", 0.5),
        ("\\dfrac{3}{4}", 0.75),
        ("\\tfrac{1}{4}", 0.25),
        ("\\frac12", 0.5),
        ("-\\frac{1}{2}", -0.5),
        ("\\frac{-1}{2}", -0.5),
        ("\\frac{1.5}{3}", 0.5),
        ("3/4", 0.75),
        ("1.2e-3", 0.0012),
        ("1.2E+3", 1200.0),
        ("1.2 \\times 10^{-3}", 0.0012),
        ("1.2\\cdot10^{3}", 1200.0),
        ("2 × 10^6", 2e6),
        ("5*10^2", 500.0),
        ("10^{5}", 1e5),
        ("10^5", 1e5),
        ("10^{-3}", 0.001),
        ("50\\%", 50.0),
        ("50%", 50.0),
        ("50 percent", 50.0),
        ("3.2 \\text{ m/s}", 3.2),
        ("3.2 m/s", 3.2),
        ("4.8 m", 4.8),
        ("9.8 m/s^2", 9.8),
        ("5 C", 5.0),
        ("7 \\mu \\mathrm{C}", 7.0),
        ("12 \\mathrm{kJ} \\mathrm{mol}^{-1}", 12.0),
        ("5.1 \\times 10^2 \\mathrm{~N}", 510.0),
        ("30^\\circ", 30.0),
        ("30^{\\circ}", 30.0),
        ("1000 \\Omega", 1000.0),
        ("5 apples", 5.0),
        ("\\$89,034.79", 89034.79),
        ("$42$", 42.0),
        ("\\boxed{12}", 12.0),
        ("\\text{5 m}", 5.0),
        ("{7}", 7.0),
        ("(5)", 5.0),
        ("\\approx 3.14", 3.14),
        ("42.", 42.0),
        ("1e300", 1e300),
    ],
)
def test_parse_number_reads_written_forms(text: str, value: float) -> None:
    assert parse_number(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "2\\sqrt{3}",
        "2 \\sqrt{2}",
        "3\\pi",
        "2x",
        "2 x",
        "3 e",
        "2^{10}",
        "5!",
        "1\\frac{1}{2}",
        "1, 2",
        "12,34",
        "1,234,5",
        "5 and 7",
        "x = 5",
        "x + 1",
        "10^{10^{10}}",
        "10**10**10",
        "1e999999",
        "1e400",
        "\\frac{1}{0}",
        "1/0",
        "9" * (MAX_NUMBER_CHARS + 1),
    ],
)
def test_parse_number_refuses_non_numbers(text: str) -> None:
    assert parse_number(text) is None
    assert parse_numeric(text) is None


def test_parse_numeric_keeps_exact_value_and_form() -> None:
    assert parse_numeric("0.1") == ParsedNumber(Fraction(1, 10), is_float=True, percent=False)
    assert parse_numeric("\\frac{1}{3}") == ParsedNumber(Fraction(1, 3), is_float=False, percent=False)
    assert parse_numeric("10^{-3}") == ParsedNumber(Fraction(1, 1000), is_float=False, percent=False)
    assert parse_numeric("1.0 \\times 10^2") == ParsedNumber(Fraction(100), is_float=True, percent=False)
    assert parse_numeric("25\\%") == ParsedNumber(Fraction(25), is_float=False, percent=True)
    assert parse_numeric("1.25 \\times 10^{-3} \\%").percent


def test_parse_rejects_wrong_types() -> None:
    with pytest.raises(TypeError):
        parse_number(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_numeric(b"12")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        numeric_refusal(12)  # type: ignore[arg-type]


def test_numeric_refusal_names_the_reason() -> None:
    assert numeric_refusal("1e999999") == f"exponent 999999 beyond ±{MAX_EXPONENT}"
    assert numeric_refusal("10^{-1000}") == f"exponent -1000 beyond ±{MAX_EXPONENT}"
    assert numeric_refusal("\\frac{3}{0}") == "division by zero"
    assert numeric_refusal("9" * 290 + "e100") == "beyond the float range"
    assert numeric_refusal("12") is None
    assert numeric_refusal("x + 1") is None  # not a number at all: no refusal, math-verify's business


def test_parse_of_huge_exponent_is_instant() -> None:
    import time

    start = time.perf_counter()
    for text in ("1e999999", "1e-999999999", "10^{99999999}", "1.5 \\times 10^{999999999}"):
        assert parse_number(text) is None
    assert time.perf_counter() - start < 0.1


def test_candidates_of_percent() -> None:
    assert parse_numeric("50%").candidates() == (Fraction(50), Fraction(1, 2))
    assert parse_numeric("50").candidates() == (Fraction(50),)


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("12", "12", True),
        ("12", "13", False),
        ("0.5", "\\frac{1}{2}", True),
        ("0.333333", "\\frac{1}{3}", True),  # math-verify: 6-decimal rounding when a decimal is involved
        ("0.33333", "\\frac{1}{3}", False),
        ("0.3333333", "0.3333334", True),
        ("0.1234565", "0.1234575", False),  # rounds the binary double like sympy: 0.123456 vs 0.123458
        ("3/2", "1.5", True),
        ("\\frac{2}{4}", "\\frac{1}{2}", True),
        ("\\frac{1}{3}", "\\frac{1}{3}", True),
        ("\\frac{333333}{1000000}", "\\frac{1}{3}", False),  # two fractions: exact, as in math-verify
        # math-verify 0.9, verify(parse("$gold$"), parse("$pred$")): two integers compare the numbers written
        # or their values; otherwise a percentage is its value, X/100
        ("50\\%", "50", True),
        ("100\\%", "1", True),
        ("50\\%", "0.5", True),
        ("50\\%", "\\frac{1}{2}", True),
        ("50\\%", "5", False),
        ("50\\%", "50.0", False),
        ("2.5\\%", "2.5", False),
        ("2.5\\%", "0.025", True),
        ("-2.5\\%", "-0.025", True),
        ("50\\%", "50\\%", True),
        ("5.0", "5", True),
        ("1,234", "1234", True),
        ("\u22122", "-2", True),
        ("-2", "2", False),
        ("123456789.1", "123456789.2", False),
    ],
)
def test_numbers_equal_is_math_verify_compatible(pred: str, gold: str, equal: bool) -> None:
    assert numbers_equal(parse_numeric(pred), parse_numeric(gold)) is equal


@pytest.mark.parametrize(
    ("pred", "gold", "rel_tol", "abs_tol", "match"),
    [
        (104.0, 100.0, 0.05, 0.0, True),
        (105.0, 100.0, 0.05, 0.0, True),  # boundary: |Δ| = 5 ≤ 0.05 · max(|105|, |100|)
        (106.0, 100.0, 0.05, 0.0, False),
        (-104.0, -100.0, 0.05, 0.0, True),
        (104.0, -100.0, 0.05, 0.0, False),
        (0.12, 0.11, 0.0, 0.01, True),  # JEEBench: abs(g - r) <= 0.01, floating-point as in its scorer
        (0.13, 0.11, 0.0, 0.01, False),
        (0.0, 0.0, 0.05, 0.0, True),
        (1e-9, 0.0, 0.05, 0.0, False),  # relative tolerance alone never accepts a miss of an exact zero
        (math.inf, math.inf, 0.05, 0.0, False),
        (math.nan, 1.0, 0.05, 1.0, False),
    ],
)
def test_numbers_match(pred: float, gold: float, rel_tol: float, abs_tol: float, match: bool) -> None:
    assert numbers_match(pred, gold, rel_tol=rel_tol, abs_tol=abs_tol) is match


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "0.1", None, True])
def test_numbers_match_rejects_bad_tolerances(bad) -> None:
    with pytest.raises(ValueError):
        numbers_match(1.0, 1.0, rel_tol=bad, abs_tol=0.0)
    with pytest.raises(ValueError):
        numbers_match(1.0, 1.0, rel_tol=0.0, abs_tol=bad)


def test_parsed_numbers_match_modes() -> None:
    p, g = parse_numeric("104"), parse_numeric("100")
    assert not parsed_numbers_match(p, g)  # no tolerance: exact
    assert parsed_numbers_match(p, g, rel_tol=0.05)
    assert parsed_numbers_match(p, g, abs_tol=4)
    assert not parsed_numbers_match(p, g, abs_tol=3.9)
    assert parsed_numbers_match(parse_numeric("2.3\\%"), parse_numeric("0.023"), rel_tol=0.05)
    assert parsed_numbers_match(parse_numeric("2.3\\%"), parse_numeric("2.3"), rel_tol=0.05)


_FINITE = st.floats(min_value=-1e250, max_value=1e250, allow_nan=False, allow_infinity=False)


def _written_forms(x: float) -> list[str]:
    mantissa, exponent = f"{x:.15e}".split("e")
    forms = [
        repr(x),
        f"{x:,}",
        f"{x:.15e}",
        f"\\boxed{{{x!r}}}",
        f"{mantissa} \\times 10^{{{int(exponent)}}}",
        f"$ {x!r} $ \\text{{ m/s}}",
        f"{x!r}.",
    ]
    if x < 0:
        forms.append("\u2212" + repr(-x))
    return forms


@settings(max_examples=200, deadline=None)
@given(_FINITE)
def test_any_float_written_several_ways_parses_back(x: float) -> None:
    for form in _written_forms(x):
        parsed = parse_number(form)
        assert parsed is not None, form
        assert math.isclose(parsed, x, rel_tol=1e-14, abs_tol=1e-300), (form, parsed, x)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_integers_with_thousands_separators_are_exact(n: int) -> None:
    assert parse_numeric(f"{n:,}").value == n
    assert parse_numeric(f"{n:,}".replace(",", "{,}")).value == n
    assert numbers_equal(parse_numeric(f"{n:,}"), parse_numeric(str(n)))


_INTEGER = st.integers(min_value=-500, max_value=500)
_WRITTEN_NUMBER = st.one_of(
    _INTEGER.map(str),
    _INTEGER.map(lambda n: f"{n}.0"),
    st.tuples(_INTEGER, st.integers(1, 9)).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
    st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False).map(str),
    st.tuples(_INTEGER, st.sampled_from([3, 7, 8]), st.integers(1, 8)).map(lambda t: f"{t[0] / t[1]:.{t[2]}f}"),
    st.integers(min_value=-500, max_value=500).map(lambda n: f"{n}\\%"),
    st.decimals(min_value=-100, max_value=100, places=2, allow_nan=False, allow_infinity=False).map(
        lambda d: f"{d}\\%"
    ),
    _INTEGER.map(lambda n: f"{n / 100}"),
)


def test_negative_percent_follows_the_same_rule_as_positive():
    assert numbers_equal(parse_numeric("-50"), parse_numeric("-50\\%"))
    assert numbers_equal(parse_numeric("50"), parse_numeric("50\\%"))


@settings(max_examples=60, deadline=None)
@given(_WRITTEN_NUMBER, _WRITTEN_NUMBER, st.booleans())
def test_default_comparison_agrees_with_math_verify(pred: str, gold: str, same: bool) -> None:
    """The fast path reproduces math-verify's verdict on plain numbers (differential test)."""
    from math_verify import parse, verify

    gold = pred if same else gold
    expected = verify(parse(f"${gold}$"), parse(f"${pred}$"))
    assert numbers_equal(parse_numeric(pred), parse_numeric(gold)) is expected, (pred, gold)
