"""The math-verify fallback for answers that are not plain numbers, with guards against runaway input.

math-verify (and sympy under it) is imported lazily: importing `recovery.grading` stays cheap, and the
fast numeric path never pays for sympy. `screen_expression` refuses input that would make sympy compute
astronomically large numbers (``10^{10^{10}}``, ``10**10**10``, ``100000!``); a CPU-time budget per
comparison (`cpu_budget`) bounds the rest, and `recovery.grading.Grader` adds a kernel CPU limit and a
wall-clock cap by running each comparison in a worker process it can kill (`recovery.grading.pool`).
"""

from __future__ import annotations

import math
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from recovery.grading.reading import has_math_markup
from recovery.types import Verdict

__all__ = [
    "MAX_EXPRESSION_CHARS",
    "MAX_POWER",
    "CpuBudgetExceeded",
    "budget_label",
    "compare_with_math_verify",
    "cpu_budget",
    "screen_expression",
    "warm_up",
]

#: Gold answers longer than this are not sent to sympy (no real final answer is that long).
MAX_EXPRESSION_CHARS = 1_000
#: A prediction is a response's answer part, math-verify finding the answer in it; at most this long.
MAX_PREDICTION_CHARS = 20_000
#: Largest literal exponent / factorial argument sympy is allowed to see.
MAX_POWER = 10_000

_CHAINED_POWER = re.compile(r"(?:\^|\*\*)\s*[-+]?\d+(?:\.\d+)?\s*(?:\^|\*\*)")
_POWER_LITERAL = re.compile(r"(?:\^|\*\*)\s*\{?\s*[-+]?\s*(\d+)")
_FACTORIAL_LITERAL = re.compile(r"(\d+)\s*\}?\s*!")


def screen_expression(text: str, max_chars: int = MAX_EXPRESSION_CHARS) -> str | None:
    """Why ``text`` (at most ``max_chars`` long) must not be handed to sympy, or None when it may be.

    >>> screen_expression(r"10^{10^{10}}"), screen_expression("x^2 + 1")
    ('nested exponent', None)
    """
    if len(text) > max_chars:
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
    # math-verify's LaTeX extraction needs delimiters; bare "50\%" or "\dfrac14" otherwise misparse. A text
    # that has them (a response's answer part) is parsed as it stands, as math-verify's users call it.
    return text if has_math_markup(text) else f"${text}$"


class CpuBudgetExceeded(BaseException):
    """A comparison used up its CPU budget. A BaseException, like math-verify's own timeout, so that the
    ``except Exception`` around math-verify's and sympy's steps does not swallow it."""


@contextmanager
def cpu_budget(seconds: float) -> Iterator[None]:
    """Raise `CpuBudgetExceeded` in the block once this process has spent ``seconds`` of CPU time in it.

    The clock is ``ITIMER_PROF`` (user + system CPU time of this process), not the wall clock: a busy
    machine slows a computation down but does not make it use more CPU, so the same input gets the same
    verdict idle or loaded. After the budget runs out the timer fires again every 50 ms of CPU, in case
    some library code catches and drops the first exception. Signals are served between Python bytecodes
    only, so a computation stuck inside one C call is not stopped here; `recovery.grading.Grader` workers
    add a kernel CPU limit for that. Main thread only (``signal.signal`` raises ``ValueError`` elsewhere).
    """
    armed = [True]

    def handler(signum, frame):  # noqa: ARG001
        if armed[0]:
            raise CpuBudgetExceeded(f"cpu {seconds:g} s")

    old_handler = signal.signal(signal.SIGPROF, handler)
    old_timer = signal.setitimer(signal.ITIMER_PROF, seconds, 0.05)
    try:
        yield
    finally:
        armed[0] = False  # a signal arriving from here on must not turn a finished comparison into a timeout
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old_handler)
        if old_timer[0] > 0:  # someone else's profiling timer: leave it running
            signal.setitimer(signal.ITIMER_PROF, *old_timer)


def budget_label(seconds: float) -> str:
    """How a verdict's budget is named in `recovery.types.Grade.detail`: ``"cpu 5 s"``."""
    return f"cpu {seconds:g} s"


_WARMED = False
#: Comparisons run once per process before the first budgeted one: the first use of each kind of
#: expression (roots, polynomials, intervals, sets, relations, matrices) makes sympy and math-verify's
#: parser import and build what they need, which would otherwise be charged to the first item's budget.
WARM_UP = (
    ("\\frac{2}{3}\\sqrt{2}", "\\frac{2\\sqrt{2}}{3}"),
    ("x^2+2x+1", "(x+1)^2"),
    ("[0, \\frac{1}{2})", "[0, 0.5)"),
    ("\\{1, 2\\}", "\\{2, 1\\}"),
    ("x = 2", "2"),
    ("y < 3", "(-\\infty, 3)"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)"),
    ("\\sin x + \\log(e)", "1 + \\sin(x)"),
    ("2+3i", "3i+2"),
)


def _math_verify():
    """math-verify's ``parse``/``verify`` and its LaTeX config, imported on first use."""
    import math_verify.grader
    import math_verify.parser
    from math_verify import LatexExtractionConfig, parse, verify

    # We pass timeout=None on purpose (our CPU budget replaces its wall-clock alarms); skip its one-off
    # warning that nothing bounds the computation.
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    return LatexExtractionConfig, parse, verify


def warm_up() -> None:
    """Run the `WARM_UP` comparisons (once per process), so no item's budget pays for first-use set-up."""
    global _WARMED
    if _WARMED:
        return
    _WARMED = True
    for pred, gold in WARM_UP:
        try:
            with cpu_budget(30.0):
                _compare(pred, gold, None, None)
        except (Exception, CpuBudgetExceeded):  # noqa: BLE001 - warming only; fixed inputs
            pass


def _numeric_value(exprs: list) -> float | None:
    """A float for the first parsed sympy object that evaluates to a finite real number."""
    import sympy

    for expr in exprs:
        if not isinstance(expr, sympy.Basic):
            continue
        try:
            value = expr.evalf() if expr.is_number else None
            if value is not None and value.is_real:
                number = float(value)
                return number if math.isfinite(number) else None
        except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError):
            return None
    return None


def _compare(pred: str, gold: str, rel_tol: float | None, abs_tol: float | None) -> tuple[Verdict, str]:
    """The comparison itself, unbounded: run it under `cpu_budget`."""
    LatexExtractionConfig, parse, verify = _math_verify()
    # LaTeX extraction only: math-verify's plain-expression extractor goes through sympy's parse_expr,
    # which calls eval() on the (tokenised) text. Model text is never evaluated as Python.
    latex_only = [LatexExtractionConfig()]
    gold_parsed = parse(_as_latex(gold), latex_only, parsing_timeout=None)
    if not gold_parsed:
        return Verdict.UNPARSABLE_GOLD, f"math-verify cannot parse the gold answer {gold[:80]!r}"
    pred_parsed = parse(_as_latex(pred), latex_only, parsing_timeout=None)
    if not pred_parsed:
        return Verdict.WRONG, f"math-verify finds no answer in the prediction {pred[-80:]!r}"
    if rel_tol is not None or abs_tol is not None:
        g, p = _numeric_value(gold_parsed), _numeric_value(pred_parsed)
        if g is not None and p is not None:
            ok = math.isclose(p, g, rel_tol=rel_tol or 0.0, abs_tol=abs_tol or 0.0)
            return (Verdict.CORRECT if ok else Verdict.WRONG), (
                f"math-verify numeric value {p:.6g} {'≈' if ok else '≠'} {g:.6g} "
                f"(rel_tol={rel_tol or 0}, abs_tol={abs_tol or 0})"
            )
    read = f"read {_shown(pred_parsed)} against {_shown(gold_parsed)}"
    if verify(gold_parsed, pred_parsed, timeout_seconds=None):
        return Verdict.CORRECT, f"math-verify: equivalent ({read})"
    return Verdict.WRONG, f"math-verify: not equivalent ({read})"


def _shown(parsed: list) -> str:
    """What math-verify read, as it writes it (its last item is the extracted text)."""
    return repr(str(parsed[-1])[:80])


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
    ``math.isclose``; otherwise ``verify`` decides. The whole comparison gets ``timeout_s`` seconds of
    CPU time (`cpu_budget`) and ends in ``Verdict.TIMEOUT`` when it needs more. math-verify's own
    timeouts are switched off: they are wall-clock alarms, which a loaded machine runs out of on easy
    items. The detail of every verdict reached here names its budget (``"... (cpu 5 s)"``). The first
    call in a process runs `warm_up` first, outside any item's budget, as the `recovery.grading.Grader`
    workers do before taking items, so a verdict does not depend on what the process graded before.

    The budget is a signal timer, so this must run in a main thread: elsewhere it returns
    ``Verdict.ERROR`` rather than risk an unbounded computation (use `recovery.grading.Grader`). It
    counts the CPU time of the whole process, so other busy threads here shorten it; the Grader's
    workers run nothing else.
    """
    if threading.current_thread() is not threading.main_thread():
        return Verdict.ERROR, "math-verify needs the main thread (its time budget is a signal); use Grader"
    reason = screen_expression(gold, MAX_PREDICTION_CHARS if has_math_markup(gold) else MAX_EXPRESSION_CHARS)
    if reason:
        return Verdict.UNPARSABLE_GOLD, f"gold answer refused: {reason}"
    reason = screen_expression(pred, MAX_PREDICTION_CHARS)
    if reason:
        return Verdict.WRONG, f"prediction refused: {reason}"
    try:
        _math_verify()
    except ImportError as exc:  # pragma: no cover - math-verify is a core dependency
        return Verdict.ERROR, f"math-verify unavailable: {exc}"
    warm_up()
    budget = budget_label(timeout_s)
    try:
        with cpu_budget(timeout_s):
            verdict, detail = _compare(pred, gold, rel_tol, abs_tol)
    except CpuBudgetExceeded:
        return Verdict.TIMEOUT, f"no verdict within {budget}"
    except Exception as exc:  # math-verify/sympy failures on odd text: a verdict, never a crash
        return Verdict.ERROR, f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]} ({budget})"
    return verdict, f"{detail} ({budget})"
