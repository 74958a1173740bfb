"""The math-verify fallback for answers that are not plain numbers, with guards against runaway input.

math-verify (and sympy under it) is imported lazily: importing `recovery.grading` stays cheap, and the
fast numeric path never pays for sympy. `screen_expression` refuses input that would make sympy compute
astronomically large numbers (``10^{10^{10}}``, ``10**10**10``, ``100000!``); SIGALRM timeouts inside
math-verify bound the rest, and `recovery.grading.pool` adds a hard outer timeout by killing the worker.
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from recovery.types import Verdict

__all__ = ["MAX_EXPRESSION_CHARS", "MAX_POWER", "screen_expression", "compare_with_math_verify"]

#: Answers longer than this are not sent to sympy (no real final answer is that long).
MAX_EXPRESSION_CHARS = 1_000
#: Largest literal exponent / factorial argument sympy is allowed to see.
MAX_POWER = 10_000

_CHAINED_POWER = re.compile(r"(?:\^|\*\*)\s*[-+]?\d+(?:\.\d+)?\s*(?:\^|\*\*)")
_POWER_LITERAL = re.compile(r"(?:\^|\*\*)\s*\{?\s*[-+]?\s*(\d+)")
_FACTORIAL_LITERAL = re.compile(r"(\d+)\s*\}?\s*!")


def screen_expression(text: str) -> str | None:
    """Why ``text`` must not be handed to sympy, or None when it may be.

    >>> screen_expression(r"10^{10^{10}}"), screen_expression("x^2 + 1")
    ('nested exponent', None)
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        return f"too long ({len(text):,} characters)"
    if _CHAINED_POWER.search(text):
        return "nested exponent"
    for match in re.finditer(r"\^\s*\{", text):
        group = _brace_group(text, match.end() - 1)
        if group is None or "^" in group or "**" in group:
            return "nested exponent"
    if any(_too_big(m.group(1)) for m in _POWER_LITERAL.finditer(text)):
        return f"exponent above {MAX_POWER}"
    if any(_too_big(m.group(1)) for m in _FACTORIAL_LITERAL.finditer(text)):
        return f"factorial above {MAX_POWER}"
    return None


def _too_big(digits: str) -> bool:
    return len(digits) > 6 or int(digits) > MAX_POWER


def _brace_group(text: str, start: int) -> str | None:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def _as_latex(text: str) -> str:
    # math-verify's LaTeX extraction needs delimiters; bare "50\%" or "\dfrac14" otherwise misparse.
    return text if "$" in text or "\\boxed" in text else f"${text}$"


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """Raise TimeoutError after ``seconds`` (main thread only; the caller checks)."""

    def handler(signum, frame):  # noqa: ARG001
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _numeric_value(exprs: list, seconds: int) -> float | None:
    """A float for the first parsed sympy object that evaluates to a finite real number."""
    import sympy

    for expr in exprs:
        if not isinstance(expr, sympy.Basic):
            continue
        try:
            with _alarm(seconds):
                value = expr.evalf() if expr.is_number else None
                if value is not None and value.is_real:
                    number = float(value)
                    return number if math.isfinite(number) else None
        except (TimeoutError, TypeError, ValueError, OverflowError, ArithmeticError, RecursionError):
            return None
    return None


def compare_with_math_verify(
    pred: str,
    gold: str,
    *,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    timeout_s: float = 5.0,
) -> tuple[Verdict, str]:
    """Compare with math-verify (``parse`` + ``verify``) in this process; return (verdict, detail).

    With a tolerance, both sides are evaluated numerically when they can be and compared with
    ``math.isclose``; otherwise ``verify`` decides. Each math-verify step gets its own SIGALRM budget of
    ``max(1, timeout_s // 3)`` seconds, so this must run in a main thread: elsewhere it returns
    ``Verdict.ERROR`` rather than risk an unbounded computation (use `recovery.grading.Grader`).
    """
    if threading.current_thread() is not threading.main_thread():
        return Verdict.ERROR, "math-verify needs the main thread (it uses SIGALRM); use Grader for threads"
    reason = screen_expression(gold)
    if reason:
        return Verdict.UNPARSABLE_GOLD, f"gold answer refused: {reason}"
    reason = screen_expression(pred)
    if reason:
        return Verdict.WRONG, f"prediction refused: {reason}"
    try:
        from math_verify import LatexExtractionConfig, parse, verify
    except ImportError as exc:  # pragma: no cover - math-verify is a core dependency
        return Verdict.ERROR, f"math-verify unavailable: {exc}"
    # LaTeX extraction only: math-verify's plain-expression extractor goes through sympy's parse_expr,
    # which calls eval() on the (tokenised) text. Model text is never evaluated as Python.
    latex_only = [LatexExtractionConfig()]

    step = max(1, int(timeout_s // 3))
    try:
        started = time.monotonic()
        gold_parsed = parse(_as_latex(gold), latex_only, parsing_timeout=step)
        if not gold_parsed:
            if time.monotonic() - started >= step * 0.95:
                return Verdict.TIMEOUT, f"math-verify parsing the gold answer took over {step} s"
            return Verdict.UNPARSABLE_GOLD, f"math-verify cannot parse the gold answer {gold[:80]!r}"
        started = time.monotonic()
        pred_parsed = parse(_as_latex(pred), latex_only, parsing_timeout=step)
        if not pred_parsed:
            if time.monotonic() - started >= step * 0.95:
                return Verdict.TIMEOUT, f"math-verify parsing the prediction took over {step} s"
            return Verdict.WRONG, f"math-verify cannot parse the prediction {pred[:80]!r}"
        if rel_tol is not None or abs_tol is not None:
            g, p = _numeric_value(gold_parsed, step), _numeric_value(pred_parsed, step)
            if g is not None and p is not None:
                ok = math.isclose(p, g, rel_tol=rel_tol or 0.0, abs_tol=abs_tol or 0.0)
                return (Verdict.CORRECT if ok else Verdict.WRONG), (
                    f"math-verify numeric value {p:.6g} {'≈' if ok else '≠'} {g:.6g} "
                    f"(rel_tol={rel_tol or 0}, abs_tol={abs_tol or 0})"
                )
        started = time.monotonic()
        ok = verify(gold_parsed, pred_parsed, timeout_seconds=step)
        if not ok and time.monotonic() - started >= step * 0.95:
            return Verdict.TIMEOUT, f"math-verify comparison took over {step} s"
    except Exception as exc:  # math-verify/sympy failures on odd text: a verdict, never a crash
        return Verdict.ERROR, f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]}"
    except BaseException as exc:  # math_verify.errors.TimeoutException derives from BaseException
        if type(exc).__name__ == "TimeoutException":
            return Verdict.TIMEOUT, "math-verify timed out"
        raise
    if ok:
        return Verdict.CORRECT, "math-verify: equivalent"
    return Verdict.WRONG, "math-verify: not equivalent"
