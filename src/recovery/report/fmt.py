"""Number formatting shared by the Markdown and HTML renderers.

One place decides how a cell looks, so the two outputs always agree and tests can check exact strings.
Missing values (None, NaN) are shown as an en dash, never as ``nan``.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"


def is_missing(value: Any) -> bool:
    """True for None and float NaN (the two ways a cell can be empty)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value: Any, digits: int = 3) -> str:
    """``0.93187`` → ``"0.932"``; missing → ``"–"``.

    >>> num(0.93187), num(float("nan"))
    ('0.932', '–')
    """
    return MISSING if is_missing(value) else f"{float(value):.{digits}f}"


def signed(value: Any, digits: int = 1) -> str:
    """A change with an explicit sign: ``+13.8``, ``-37.2``; missing → ``"–"``.

    >>> signed(13.79), signed(-0.04), signed(None)
    ('+13.8', '-0.0', '–')
    """
    return MISSING if is_missing(value) else f"{float(value):+.{digits}f}"


def mean_std(mean: Any, std: Any, digits: int = 3, *, sign: bool = False) -> str:
    """The paper's ``mean ± std`` cell (Tables 18–20). A missing std drops the ``± …`` part.

    >>> mean_std(0.9321, 0.2512), mean_std(12.0, 3.0, 1, sign=True), mean_std(0.5, None)
    ('0.932 ± 0.251', '+12.0 ± 3.0', '0.500')
    """
    if is_missing(mean):
        return MISSING
    head = signed(mean, digits) if sign else num(mean, digits)
    return head if is_missing(std) else f"{head} ± {float(std):.{digits}f}"


def interval(low: Any, high: Any, digits: int = 3) -> str:
    """A confidence interval ``[low, high]``; missing if either end is.

    >>> interval(0.9, 0.96)
    '[0.900, 0.960]'
    """
    if is_missing(low) or is_missing(high):
        return MISSING
    return f"[{float(low):.{digits}f}, {float(high):.{digits}f}]"


def timestep(t: Any) -> str:
    """``0.1`` → ``"0.1"`` (shortest form, so 0.30000000000000004 still reads 0.3).

    >>> timestep(0.30000000000000004), timestep(0.5)
    ('0.3', '0.5')
    """
    return MISSING if is_missing(t) else f"{float(t):.6g}"


def cell(value: Any) -> str:
    """Default text of a table cell given as a raw value: floats to 3 decimals, the rest via ``str``."""
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return num(value)
    return str(value)
