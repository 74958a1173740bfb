"""The units the doubt analysis classifies (part "doubt"): `UnitRules`, which each style builds
(`recovery.plan.styles`); the project's and the authors' are described here.

``default`` (the project's): the first ``n`` sentences of the continuation's *reasoning* (up to its closing
think tag), split by the configured splitter, each shown to the judge as it is; a judge reply that is neither
Yes nor No is no verdict (skipped and counted).

``reference`` (``protocol: reference``, part ``doubt``; the authors' scripts/analyze_doubt.py ``main`` with
its defaults ``--unit sentence --text-source continuations --max-sentences 20 --max-unit-chars 1000``):
the first ``n`` sentences of the *whole* continuation (closing tag and answer included), split by the
reference splitter (``sentence_units``: blank-line segments, spaCy's sentencizer), each cut to 1,000
characters; the judge is shown the unit with its newlines turned into spaces, and its reply counts as doubt
exactly when, stripped and lower-cased, it starts with "yes" — any other reply counts as No, never skipped
(`recovery.analysis.doubt_units`).

Why the default differs: the answer after the closing tag is not reasoning after the intervention, a line
break ends a step of displayed math as much as a full stop does, and a reply that is neither Yes nor No is
a failure of the judge, not evidence of no doubt (counting it as No would lower the rate silently).
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.doubt import split_sentences
from recovery.metrics import continuation_reasoning
from recovery.segment import THINK

__all__ = ["UnitRules"]


@dataclass(frozen=True)
class UnitRules:
    """How one style finds the units of a text and reads the judge: its name (``protocol``), the ``splitter``
    (`recovery.doubt.SENTENCE_SPLITTERS`), whether a continuation's whole text counts (``whole_continuation``)
    or its reasoning only, the characters each unit keeps (``max_unit_chars``, None: all), whether the judge sees
    units and its replies are read the authors' way (``authors_reading``), the judge's default reply tokens, and
    how a report describes the units (``description``, added after the splitter's) and the window's text
    (``window_source``)."""

    protocol: str
    splitter: str
    whole_continuation: bool
    max_unit_chars: int | None
    authors_reading: bool = False
    judge_tokens: int = 8
    description: str = ""
    window_source: str = "the continuation's reasoning, up to the closing think tag"

    def units(self, text: str, n: int | None) -> list[str]:
        """The first ``n`` units of ``text`` (all when None), each cut to ``max_unit_chars``."""
        found = split_sentences(text, n, splitter=self.splitter)
        return found if self.max_unit_chars is None else [unit[: self.max_unit_chars] for unit in found]

    def continuation_units(self, continuation: str, n: int, think_close: str = THINK[1]) -> list[str]:
        """The window after the intervention: `units` of the continuation (or of its reasoning, which ends at its
        model's ``think_close``; another family's tag is text)."""
        text = continuation if self.whole_continuation else continuation_reasoning(continuation, think_close)
        return self.units(text, n)
