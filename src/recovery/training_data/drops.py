"""Counting what a dataset builder leaves out, and why.

Every filter of the training-data builders records each row it drops under a (stage, reason) pair, so a
dataset card can say exactly how many candidates each filter removed. Nothing is dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Drops:
    """Dropped-row counts keyed by ``(stage, reason)``.

    >>> d = Drops()
    >>> d.add("quality", "no_doubt"); d.add("quality", "no_doubt"); d.add("dedup", "duplicate")
    >>> d.total(), d.total("quality"), d.rows()[0]
    (3, 2, {'stage': 'dedup', 'reason': 'duplicate', 'count': 1})
    """

    counts: Counter = field(default_factory=Counter)

    def add(self, stage: str, reason: str, n: int = 1) -> None:
        if n:
            self.counts[(stage, reason)] += n

    def update(self, other: Drops) -> None:
        self.counts.update(other.counts)

    def total(self, stage: str | None = None) -> int:
        return sum(c for (s, _), c in self.counts.items() if stage is None or s == stage)

    def get(self, stage: str, reason: str) -> int:
        return self.counts.get((stage, reason), 0)

    def rows(self) -> list[dict[str, Any]]:
        """Sorted ``{"stage", "reason", "count"}`` rows (for cards and JSON summaries)."""
        return [{"stage": s, "reason": r, "count": c} for (s, r), c in sorted(self.counts.items())]

    def as_dict(self) -> dict[str, int]:
        """``{"stage/reason": count}`` (JSON-friendly)."""
        return {f"{s}/{r}": c for (s, r), c in sorted(self.counts.items())}

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]]) -> Drops:
        drops = cls()
        for row in rows:
            drops.add(row["stage"], row["reason"], int(row["count"]))
        return drops
