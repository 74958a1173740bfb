"""Equivalence rates per group with Wilson intervals."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from recovery.analysis.bbm import wilson_interval
from recovery.analysis.paraphrase.constants import (
    GENERATION_ERROR,
    NO,
    UNPARSEABLE,
    YES,
)


@dataclass(frozen=True)
class EquivalenceRate:
    """Judgments of one group: ``rate`` = Yes over all ``n`` sampled (unparseable and errors count as not
    equivalent), with its Wilson interval; ``rate_parsed`` = Yes over Yes + No."""

    group: str
    n: int
    yes: int
    no: int
    unparseable: int
    errors: int
    ci_low: float
    ci_high: float

    @property
    def rate(self) -> float:
        return self.yes / self.n if self.n else math.nan

    @property
    def rate_parsed(self) -> float:
        return self.yes / (self.yes + self.no) if self.yes + self.no else math.nan


def equivalence_rates(
    rows: Iterable[Mapping[str, Any]],
    key: Callable[[Mapping[str, Any]], str] = lambda r: r["domain"],
    *,
    pooled: bool = True,
) -> list[EquivalenceRate]:
    """Rates per ``key(row)`` (default: domain), sorted, plus an ``all`` group when ``pooled``."""
    groups: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        groups[key(row)][row["verdict"]] += 1
        if pooled:
            groups["all"][row["verdict"]] += 1
    out = []
    for name in sorted(groups, key=lambda g: (g == "all", g)):
        c = groups[name]
        n = sum(c.values())
        low, high = wilson_interval(c[YES], n)
        out.append(EquivalenceRate(name, n, c[YES], c[NO], c[UNPARSEABLE], c[GENERATION_ERROR], low, high))
    return out
