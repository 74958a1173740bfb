"""The same chains in two runs (before and after training), paired as ``recovery compare`` pairs them, and which of
them changed outcome.

Two chains are "the same chain" when the report's comparison says so (`recovery.report.pairing.pair_chains`: the
same problem, intervention, timestep and N for a compared model pair; a base and a fine-tuned model intervene on
different traces, so their chain ids differ, while two runs of one model share them). A pair *improved* when its
outcome moved towards ``recovered`` (not → mixed → recovered) and *worsened* the other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.report.outcomes import RunOutcomes
from recovery.report.pairing import NothingToCompare, pair_chains
from recovery.viewer.chains import MAX_PAGE_SIZE, OUTCOMES, ChainPage, NotFound, RunChains

DIRECTIONS = ("improved", "worsened")


def _outcomes(chains: RunChains) -> tuple[RunOutcomes, np.ndarray]:
    """The graded chains of ``chains`` as report outcomes, and their positions in ``chains``."""
    graded = np.flatnonzero(chains.n > 0)
    records = [
        {
            "model": chains.label("model", i),
            "domain": chains.label("domain", i),
            "intervention": chains.label("intervention", i),
            "category": chains.label("category", i),
            "target_t": float(chains.target_t[i]),
            "problem_id": chains.label("problem_id", i),
            "n": int(chains.n[i]),
            "k": int(chains.k[i]),
            "whole_pct": float(chains.whole_pct[i]),
        }
        for i in graded
    ]
    return RunOutcomes.from_records(records), graded


@dataclass
class RunPair:
    """The paired chains of ``before`` and ``after``: positions in each (``index_before``/``index_after``)."""

    before: RunChains
    after: RunChains
    labels: tuple[str, str]
    index_before: np.ndarray
    index_after: np.ndarray
    note: str = ""

    @classmethod
    def of(cls, before: RunChains, after: RunChains, labels: tuple[str, str] = ("before", "after")) -> RunPair:
        """Pair the two runs; a pair that shares nothing holds no chains and says why (``note``)."""
        outcomes_b, graded_b = _outcomes(before)
        outcomes_a, graded_a = _outcomes(after)
        try:
            pairing = pair_chains(outcomes_b, outcomes_a, labels)
        except NothingToCompare as err:
            empty = np.empty(0, dtype=np.int64)
            return cls(before, after, labels, empty, empty, str(err))
        chains = pairing.chains
        return cls(before, after, labels, graded_b[chains["index_before"]], graded_a[chains["index_after"]])

    def changed(self, direction: str) -> np.ndarray:
        """Indices into the pairs whose outcome ``direction`` ("improved" or "worsened")."""
        if direction not in DIRECTIONS:
            raise NotFound(f"no direction {direction!r}; known: {', '.join(DIRECTIONS)}")
        rank_b = self.before.outcome[self.index_before]
        rank_a = self.after.outcome[self.index_after]
        return np.flatnonzero(rank_a < rank_b if direction == "improved" else rank_a > rank_b)

    def page(self, direction: str, selected: np.ndarray, page: int, size: int) -> ChainPage:
        """Page ``page`` of the pairs whose outcome changed in ``direction`` and whose first chain is among the
        positions ``selected`` (the list's other filters)."""
        changed = self.changed(direction)
        changed = changed[np.isin(self.index_before[changed], selected)]
        size = min(max(1, size), MAX_PAGE_SIZE)
        pages = max(1, -(-len(changed) // size))
        if page < 1 or page > pages:
            raise NotFound(f"no page {page}: {len(changed)} chains make {pages} page(s) of {size}")
        rows = [self.row(int(p)) for p in changed[(page - 1) * size : page * size]]
        return ChainPage(rows, len(changed), page, pages, size)

    def row(self, pair: int) -> dict[str, Any]:
        b, a = int(self.index_before[pair]), int(self.index_after[pair])
        summary = self.before.summary(b)
        return {
            **summary,
            "after_id": self.after.ids[a].as_py(),
            "before": OUTCOMES[self.before.outcome[b]],
            "after": OUTCOMES[self.after.outcome[a]],
            "k_before": int(self.before.k[b]),
            "k_after": int(self.after.k[a]),
        }

    def partner(self, chain_id: str) -> tuple[int, int]:
        """(position in before, position in after) of the pair whose before chain is ``chain_id``."""
        b = self.before.index_of(chain_id)
        where = np.flatnonzero(self.index_before == b)
        if not len(where):
            raise NotFound(f"chain {chain_id!r} of {self.labels[0]} has no partner in {self.labels[1]}")
        return b, int(self.index_after[where[0]])
