"""The chains of one run as a few arrays (labels as integer codes, K of N, length change, verdicts): what the
viewer filters, sorts and pages without holding a Python object per chain.

Read once when the viewer starts: the chains table's label columns (no prefix text), the per-chain tallies of the
aggregate stage (`recovery.run_dir.chain_tallies`: K of N correct and the mean length change, so the viewer's
numbers are the report's), the verdicts of the grades table, and where each chain's continuations and grades lie
(`recovery.run_dir.positions.RowsByKey`), so showing one chain reads only its own rows.

A chain's *outcome* over its N continuations (`recovery.metrics.robustness_levels`): ``recovered`` when all N are
correct, ``not`` when none is, ``mixed`` otherwise, ``ungraded`` while it has no grade yet (a run being written).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recovery.metrics import robustness_levels
from recovery.run_dir import Run, chain_tallies
from recovery.run_dir.chain_index import ChainIndex
from recovery.run_dir.positions import RowsByKey, rows_at

OUTCOMES = ("recovered", "mixed", "not", "ungraded")
LABELS = ("model", "domain", "intervention", "category")
SORTS = ("stored", "t", "correct", "length", "model", "intervention")
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


class NotFound(LookupError):
    """A chain id, filter name or filter value the run does not have: the viewer answers 404 naming it."""


@dataclass(frozen=True)
class ChainQuery:
    """One request for a list of chains: filters (None: any), a text search, a sort and a page."""

    model: str | None = None
    domain: str | None = None
    intervention: str | None = None
    category: str | None = None
    t: float | None = None
    outcome: str | None = None
    doubt: str | None = None  # "yes" / "no": doubt after the intervention in any of the chain's continuations
    verdict: str | None = None  # at least one continuation graded so
    q: str = ""
    sort: str = "stored"
    order: str = "asc"
    page: int = 1
    size: int = PAGE_SIZE

    @classmethod
    def from_params(cls, params: Mapping[str, str], extra: Collection[str] = ()) -> tuple[ChainQuery, dict[str, str]]:
        """The query of URL parameters ``params``, and the non-empty parameters as given (for links). `NotFound`
        names a parameter that is neither a field nor in ``extra`` (names a route reads itself), or a value that is
        not the number it must be."""
        known = [f.name for f in fields(cls)]
        given = {name: value for name, value in params.items() if value != ""}
        values: dict[str, Any] = {}
        for name, value in given.items():
            if name not in known and name not in extra:
                raise NotFound(f"no filter {name!r}; known: {', '.join([*known, *extra])}")
            if name in _NUMBERS:
                try:
                    values[name] = _NUMBERS[name](value)
                except ValueError:
                    raise NotFound(f"{name}={value!r} is not a number") from None
            elif name in known:
                values[name] = value
        return cls(**values), given


_NUMBERS = {"t": float, "page": int, "size": int}


@dataclass(frozen=True)
class ChainPage:
    """One page of a filtered, sorted list: ``rows`` (one dict per chain), ``total`` chains matching."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    size: int


class RunChains:
    """Every chain of a run, column-wise (see the module doc). ``index_of(chain_id)`` finds one."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.problems = run.problems()
        domains = {pid: p.domain for pid, p in self.problems.items()}
        columns = ["id", "trace_id", "problem_id", "model", "intervention", "category", "target_t"]
        parts: dict[str, list] = {name: [] for name in columns}
        for batch in run.chain_batches(columns):
            for name in columns:
                parts[name].append(batch.column(name))
        whole = {
            n: pa.chunked_array(p, type=pa.float64() if n == "target_t" else pa.string()) for n, p in parts.items()
        }
        self.ids = whole["id"].combine_chunks()
        self.lookup = ChainIndex(self.ids)
        self.target_t = whole["target_t"].to_numpy().astype(np.float64)
        self.codes: dict[str, np.ndarray] = {}
        self.values: dict[str, list[str]] = {}
        for name in ("model", "intervention", "category", "problem_id", "trace_id"):
            self.codes[name], self.values[name] = _encode(whole[name])
        problem_domain = [domains.get(pid, "unknown") for pid in self.values["problem_id"]]
        domain_values = list(dict.fromkeys(problem_domain))
        to_domain = np.array([domain_values.index(d) for d in problem_domain], dtype=np.int32)
        self.codes["domain"], self.values["domain"] = to_domain[self.codes["problem_id"]], domain_values
        self.tallies = chain_tallies(run)
        self.n, self.k, self.whole_pct = self._tallied()
        self.outcome = self._outcomes()
        self.continuations = RowsByKey(run.tables.continuations, "chain_id", self.ids)
        self.grades = RowsByKey(run.tables.grades, "chain_id", self.ids)
        self.traces = RowsByKey(run.tables.traces, "id", pa.array(self.values["trace_id"], pa.string()))
        self.verdicts, self.verdict_bits = self._verdict_bits()
        self._searches: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.ids)

    # -- reading ---------------------------------------------------------------------------------------------

    def _tallied(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = np.zeros(len(self), dtype=np.int64)
        k = np.zeros(len(self), dtype=np.int64)
        whole = np.full(len(self), np.nan)
        if len(self.tallies):
            where, found = self.lookup.find(self.tallies.ids)
            found = found.to_numpy(zero_copy_only=False)
            n[where], k[where] = self.tallies.n[found], self.tallies.k[found]
            whole[where] = self.tallies.whole_pct[found]
        return n, k, whole

    def _outcomes(self) -> np.ndarray:
        """Codes into `OUTCOMES` per chain."""
        outcome = np.full(len(self), OUTCOMES.index("ungraded"), dtype=np.int8)
        graded = self.n > 0
        once, _, every = robustness_levels(self.k[graded], self.n[graded])
        outcome[graded] = np.where(every, 0, np.where(once, 1, 2))
        return outcome

    def _verdict_bits(self) -> tuple[list[str], np.ndarray]:
        """The verdicts the run's grades hold, and per chain a bit per verdict some continuation of it got."""
        names: list[str] = []
        bits = np.zeros(len(self), dtype=np.int64)
        for batch in self.run.grade_batches(["chain_id", "verdict"]):
            index, found = self.lookup.find(batch.column(0))
            encoded = pc.dictionary_encode(pc.fill_null(batch.column(1).filter(found), ""))
            mapping = []
            for name in encoded.dictionary.to_pylist():
                if name not in names:
                    names.append(name)
                mapping.append(1 << names.index(name))
            if len(index):
                np.bitwise_or.at(bits, index, np.array(mapping, dtype=np.int64)[encoded.indices.to_numpy()])
        return names, bits

    def index_of(self, chain_id: str) -> int:
        """The position of ``chain_id``; `NotFound` naming it when the run has no such chain."""
        if not isinstance(chain_id, str) or len(chain_id) > 200:
            raise NotFound(f"no chain {str(chain_id)[:200]!r} in this run")
        where, found = self.lookup.find(pa.array([chain_id], type=pa.string()))
        if not found[0].as_py():
            raise NotFound(f"no chain {chain_id!r} in this run")
        return int(where[0])

    def label(self, name: str, i: int) -> str:
        return self.values[name][self.codes[name][i]]

    def chain_row(self, i: int) -> dict[str, Any]:
        """The stored row of chain ``i``, prefix and inserted text included (one row group read)."""
        return rows_at(self.run.tables.chains, [i]).to_pylist()[0]

    def summary(self, i: int) -> dict[str, Any]:
        """What a list shows of chain ``i``."""
        return {
            "id": self.ids[i].as_py(),
            **{name: self.label(name, i) for name in (*LABELS, "problem_id", "trace_id")},
            "t": float(self.target_t[i]),
            "n": int(self.n[i]),
            "k": int(self.k[i]),
            "outcome": OUTCOMES[self.outcome[i]],
            "whole_pct": float(self.whole_pct[i]),
        }

    # -- filtering ---------------------------------------------------------------------------------------------

    def matching(self, query: ChainQuery, doubt_of=None) -> np.ndarray:
        """Positions of the chains ``query`` selects, in stored order. ``doubt_of(positions) -> bool array``
        answers the doubt filter (computed only for the chains the other filters kept)."""
        mask = np.ones(len(self), dtype=bool)
        for name in LABELS:
            value = getattr(query, name)
            if value is not None:
                mask &= self.codes[name] == self._code(name, value)
        if query.t is not None:
            at = np.isclose(self.target_t, query.t, rtol=0, atol=1e-9)
            if not at.any():
                raise NotFound(f"no timestep t={query.t:g} in this run; known: {self._known_t()}")
            mask &= at
        if query.outcome is not None:
            if query.outcome not in OUTCOMES:
                raise NotFound(f"no outcome {query.outcome!r}; known: {', '.join(OUTCOMES)}")
            mask &= self.outcome == OUTCOMES.index(query.outcome)
        if query.verdict is not None:
            if query.verdict not in self.verdicts:
                raise NotFound(f"no verdict {query.verdict!r} in this run; known: {', '.join(self.verdicts) or 'none'}")
            mask &= (self.verdict_bits & (1 << self.verdicts.index(query.verdict))) != 0
        if query.q:
            mask &= self.search(query.q)
        positions = np.flatnonzero(mask)
        if query.doubt is not None:
            if query.doubt not in ("yes", "no"):
                raise NotFound(f"no doubt value {query.doubt!r}; known: yes, no")
            if doubt_of is None:
                raise NotFound("the doubt filter needs the run's doubt detector")
            flags = doubt_of(positions)
            positions = positions[flags if query.doubt == "yes" else ~flags]
        return positions

    def _code(self, name: str, value: str) -> int:
        try:
            return self.values[name].index(value)
        except ValueError:
            known = ", ".join(self.values[name]) or "none"
            raise NotFound(f"no {name} {value!r} in this run; known: {known}") from None

    def _known_t(self) -> str:
        return ", ".join(f"{t:g}" for t in np.unique(self.target_t)) or "none"

    def search(self, text: str) -> np.ndarray:
        """Chains whose problem or original trace contains ``text`` (case-insensitive; remembered per text)."""
        if text not in self._searches:
            problems = {pid for pid, p in self.problems.items() if text.lower() in p.question.lower()}
            traces: set[str] = set()
            for batch in self.run.tables.traces.iter_batches(["id", "text"]):
                hit = pc.match_substring(pc.fill_null(batch.column(1), ""), text, ignore_case=True)
                traces.update(batch.column(0).filter(hit).to_pylist())
            by_problem = np.array([pid in problems for pid in self.values["problem_id"]], dtype=bool)
            by_trace = np.array([tid in traces for tid in self.values["trace_id"]], dtype=bool)
            if len(self._searches) > 32:
                self._searches.clear()
            self._searches[text] = by_problem[self.codes["problem_id"]] | by_trace[self.codes["trace_id"]]
        return self._searches[text]

    def page(self, query: ChainQuery, doubt_of=None) -> ChainPage:
        """The page ``query`` asks for; `NotFound` for a page past the last one."""
        if query.sort not in SORTS:
            raise NotFound(f"no sort {query.sort!r}; known: {', '.join(SORTS)}")
        if query.order not in ("asc", "desc"):
            raise NotFound(f"no order {query.order!r}; known: asc, desc")
        size = min(max(1, query.size), MAX_PAGE_SIZE)
        positions = self._sorted(self.matching(query, doubt_of), query.sort, query.order == "desc")
        pages = max(1, -(-len(positions) // size))
        if query.page < 1 or query.page > pages:
            raise NotFound(f"no page {query.page}: {len(positions)} chains make {pages} page(s) of {size}")
        chosen = positions[(query.page - 1) * size : query.page * size]
        return ChainPage([self.summary(int(i)) for i in chosen], len(positions), query.page, pages, size)

    def _sorted(self, positions: np.ndarray, sort: str, descending: bool) -> np.ndarray:
        if sort == "stored":
            return positions[::-1] if descending else positions
        with np.errstate(invalid="ignore", divide="ignore"):
            key = {
                "t": lambda p: self.target_t[p],
                "correct": lambda p: np.where(self.n[p] > 0, self.k[p] / np.maximum(self.n[p], 1), -1.0),
                "length": lambda p: np.nan_to_num(self.whole_pct[p], nan=-np.inf),
                "model": lambda p: self.codes["model"][p],
                "intervention": lambda p: self.codes["intervention"][p],
            }[sort](positions)
        order = np.lexsort((positions, -key if descending else key))
        return positions[order]


def _encode(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes and their distinct values (in first-seen order) of a string column."""
    encoded = pc.dictionary_encode(pc.fill_null(column, "")).combine_chunks()
    if not len(encoded):
        return np.empty(0, dtype=np.int32), []
    return encoded.indices.to_numpy().astype(np.int32), encoded.dictionary.to_pylist()
