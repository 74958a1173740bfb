"""Brace balance of LaTeX answer text, shared by answer cleaning and number parsing."""

from __future__ import annotations

__all__ = ["balanced"]


def balanced(text: str) -> bool:
    """Whether every ``{`` in ``text`` is closed by a later ``}`` and no ``}`` closes nothing.

    Wrappers such as ``\\text{...}`` are peeled off an answer only when what they hold is balanced, so that
    ``\\text{a}+\\text{b}`` keeps both groups.

    >>> balanced("{1}{2}"), balanced("1}{2")
    (True, False)
    """
    depth = 0
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0
