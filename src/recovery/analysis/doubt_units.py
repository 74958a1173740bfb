"""The authors' side of the doubt analysis that is not a unit rule (`recovery.plan.doubt`): how their judge is
shown a unit and how its reply is read (scripts/analyze_doubt.py), and the reasoning window of a continuation."""

from __future__ import annotations

from recovery.metrics import continuation_reasoning
from recovery.segment import THINK

__all__ = ["authors_doubt", "authors_unit_text", "reasoning_after_intervention"]


def reasoning_after_intervention(continuation: str, think_close: str = THINK[1]) -> str:
    """The reasoning part of a continuation: its text up to its model's first closing think tag
    (``think_close``; another family's tag is text), all of it if none (`recovery.metrics.continuation_reasoning`)."""
    return continuation_reasoning(continuation, think_close)


def authors_unit_text(unit: str) -> str:
    """The unit as the authors' doubt prompt shows it: newlines replaced by spaces (scripts/analyze_doubt.py)."""
    return unit.replace("\n", " ")


def authors_doubt(reply: str) -> bool:
    """The authors' reading of a doubt judge's reply: doubt iff it starts with "yes" once stripped and
    lower-cased (scripts/analyze_doubt.py ``main``); anything else, unparsable included, is No.

    >>> authors_doubt(" Yes."), authors_doubt("yesterday"), authors_doubt("**Yes**"), authors_doubt("Maybe")
    (True, True, False, False)
    """
    return reply.strip().lower().startswith("yes")
