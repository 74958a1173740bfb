"""`Skips`: rows or items left out, counted by reason, with a few examples of each for the report.

Loaders, the trace importer and the filters never crash on one bad row: they count it here instead. A
reason is a short stable slug (``missing_field:response``, ``answer_not_numeric``); the examples say where
(file and row, or an item id) so a person can look the row up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["Skips"]


class Skips:
    """A counter of skipped items by reason, keeping the first ``max_examples`` locations per reason.

    >>> s = Skips()
    >>> s.add("missing_field:response", "traces.jsonl row 3")
    >>> s.add("missing_field:response", "traces.jsonl row 9")
    >>> s.total, s.counts["missing_field:response"], s.examples["missing_field:response"][0]
    (2, 2, 'traces.jsonl row 3')
    >>> print(s.summary())
    missing_field:response: 2 (e.g. traces.jsonl row 3; traces.jsonl row 9)
    """

    def __init__(self, max_examples: int | None = 3) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}
        self.max_examples = max_examples

    def add(self, reason: str, where: str = "", count: int = 1) -> None:
        """Count ``count`` skips for ``reason``; remember ``where`` as an example while there is room."""
        if count <= 0:
            return
        self.counts[reason] += count
        examples = self.examples.setdefault(reason, [])
        if where and (self.max_examples is None or len(examples) < self.max_examples):
            examples.append(where)

    def update(self, other: Skips | Mapping[str, int]) -> None:
        """Add another `Skips` (with its examples) or a plain reason → count mapping."""
        if isinstance(other, Skips):
            for reason, count in other.counts.items():
                self.counts[reason] += count
                kept = self.examples.setdefault(reason, [])
                room = None if self.max_examples is None else max(self.max_examples - len(kept), 0)
                kept.extend(other.examples.get(reason, [])[:room])
        else:
            for reason, count in other.items():
                self.add(reason, count=count)

    def items(self):
        """``(reason, where)`` for every skip: its recorded location, or ``"<reason> #<i>"`` past the examples
        kept (use ``max_examples=None`` to keep every location)."""
        for reason, count in self.counts.items():
            examples = self.examples.get(reason, [])
            yield from ((reason, where) for where in examples[:count])
            yield from ((reason, f"{reason} #{i}") for i in range(len(examples), count))

    @property
    def total(self) -> int:
        """All skips, over every reason."""
        return sum(self.counts.values())

    def __len__(self) -> int:
        return self.total

    def __bool__(self) -> bool:
        return self.total > 0

    def as_dict(self) -> dict[str, int]:
        """Reason → count, sorted by reason (stable for logs and tests)."""
        return dict(sorted(self.counts.items()))

    def table_rows(self) -> list[tuple[str, int, str]]:
        """``(reason, count, examples joined by "; ")`` per reason, sorted by reason: a report's skip table."""
        return [
            (reason, count, "; ".join(self.examples.get(reason, []))) for reason, count in sorted(self.counts.items())
        ]

    def summary(self) -> str:
        """One line per reason, most frequent first: ``reason: count (e.g. where; where)``."""
        lines = []
        for reason, count in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            where = self.examples.get(reason) or []
            lines.append(f"{reason}: {count}" + (f" (e.g. {'; '.join(where)})" if where else ""))
        return "\n".join(lines) if lines else "no skips"

    def __repr__(self) -> str:
        return f"Skips({self.as_dict()!r})"

    @classmethod
    def merged(cls, parts: Iterable[Skips]) -> Skips:
        """One `Skips` holding all of ``parts``."""
        out = cls()
        for part in parts:
            out.update(part)
        return out
