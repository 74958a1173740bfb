"""What a report is made of: the run's numbers (`ReportData`) and renderable pieces (`Section`).

`ReportData` is deliberately plain — lists of dicts and a metadata dict — so the pipeline (reading a run
directory), the training callback (holding aggregates in memory) and ``recovery compare`` can all build one
without depending on each other. Extra analyses contribute `Section`s, rendered after the standard ones in
the order given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from recovery.interventions.registry import INTERVENTIONS
from recovery.metrics import LEVELS
from recovery.plan.parts import LengthMeasure

KEY_FIELDS: tuple[str, ...] = ("model", "domain", "intervention", "target_t")
STAT_NAMES: tuple[str, ...] = (*LEVELS, "whole_pct", "remaining_pct")


def length_measure_text(length: LengthMeasure, project: str, lead: str = "") -> str:
    """What a run's length columns measure, for a caption: ``project`` (the project's measure, in the caption's
    own words) or, for a run whose ``length`` part has a measure of its own, ``lead`` and its caption."""
    return project if length.caption is None else lead + length.caption


STAT_SUFFIXES: tuple[str, ...] = ("mean", "std", "ci_low", "ci_high")
CATEGORIES: tuple[str, ...] = ("benign", "neutral", "adversarial", "other")
# Key fields a caller may leave out when it aggregated more coarsely (e.g. a one-model training callback);
# they are filled with this placeholder rather than refused.
ALL = "all"


@dataclass(frozen=True)
class Figure:
    """A finished figure: ``name`` becomes ``figures/<name>.png``; ``png_bytes`` holds the PNG file."""

    name: str
    png_bytes: bytes
    caption: str = ""


@dataclass(frozen=True)
class Table:
    """A table both renderers understand. Cells are strings or raw values (see `fmt.cell`).

    ``align`` has one of ``"l"``/``"r"`` per column (default: left). ``collapsed`` asks the HTML page to fold
    a long table into a ``<details>`` element; Markdown always shows it. ``links``, when given, holds one URL (or
    None) per row, which the HTML page puts on the row's first cell (a cell's chains in the run viewer).
    """

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    align: Sequence[str] | None = None
    caption: str = ""
    collapsed: bool = False
    links: Sequence[str | None] = ()

    def __post_init__(self) -> None:
        if self.links and len(self.links) != len(self.rows):
            raise ValueError(f"table {self.title!r}: {len(self.links)} links for {len(self.rows)} rows")
        width = len(self.columns)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table {self.title!r}: row {i} has {len(row)} cells, expected {width}")
        if self.align is not None and len(self.align) != width:
            raise ValueError(f"table {self.title!r}: align has {len(self.align)} entries, expected {width}")


@dataclass(frozen=True)
class Section:
    """One titled part of a report: Markdown prose, then figures, then tables, then ``subsections``.

    A table is a `Table` or, for analyses that already have one, a Markdown pipe-table string.
    """

    title: str
    markdown: str = ""
    figures: Sequence[Figure] = ()
    tables: Sequence[Table | str] = ()
    subsections: Sequence[Section] = ()


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows.

    ``rows``: `recovery.metrics.AggregateRow.flat()` dicts, one per (model, domain, intervention, target_t).
    ``clean``: un-intervened accuracy, dicts with ``model``, ``domain``, ``n``, ``accuracy`` (0–1).
    ``skips``: dicts with ``stage``, ``reason``, ``count``; ``None`` means no summary was provided.
    ``meta``: run metadata (config summary, models, dataset, n, timesteps, seed, version, …), shown as given.
    ``sections``: extra sections from other analyses, rendered after the standard ones.
    ``categories``: intervention → category overrides (otherwise rows' ``category`` or the registry).
    ``standard``: render the standard sections (off for documents such as a comparison).

    Build it with `from_dicts`, which normalises the rows the renderers rely on.
    """

    rows: tuple[Mapping[str, Any], ...] = ()
    clean: tuple[Mapping[str, Any], ...] = ()
    skips: tuple[Mapping[str, Any], ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()
    title: str = "Recovery report"
    categories: Mapping[str, str] = field(default_factory=dict)
    standard: bool = True
    length: LengthMeasure = field(default_factory=LengthMeasure)  # the run's length measure (its plan's part "length")

    @classmethod
    def from_dicts(
        cls,
        rows: Iterable[Mapping[str, Any] | Any] = (),
        clean: Iterable[Mapping[str, Any]] | None = (),
        skips: Iterable[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        sections: Iterable[Section] = (),
        *,
        title: str = "Recovery report",
        categories: Mapping[str, str] | None = None,
    ) -> ReportData:
        """Build from plain lists of dicts (or `AggregateRow`s for ``rows``), validating and normalising.

        Missing statistics become NaN, ``None`` becomes NaN, ``target_t`` becomes a float; a row without an
        ``intervention`` or ``target_t`` is refused with a message naming it.
        """
        norm_rows = tuple(_normalize_row(r, i) for i, r in enumerate(rows))
        seen: dict[tuple, int] = {}
        for i, r in enumerate(norm_rows):
            key = (r["model"], r["domain"], r["intervention"], round(r["target_t"], 9))
            if key in seen:
                # Tables and figures show one number per cell; two rows for one cell would silently drop one.
                raise ValueError(
                    f"aggregate rows {seen[key]} and {i} share model/domain/intervention/target_t {key}; "
                    "aggregate by exactly (model, domain, intervention, target_t)"
                )
            seen[key] = i
        norm_clean = tuple(_normalize_clean(c, i) for i, c in enumerate(clean or ()))
        norm_skips = None if skips is None else tuple(_normalize_skip(s, i) for i, s in enumerate(skips))
        return cls(
            rows=norm_rows,
            clean=norm_clean,
            skips=norm_skips,
            meta=dict(meta or {}),
            sections=tuple(sections),
            title=title,
            categories=dict(categories or {}),
        )

    def with_sections(self, *sections: Section) -> ReportData:
        """A copy with ``sections`` appended (for analyses that add to a report)."""
        return replace(self, sections=(*self.sections, *sections))

    def to_dict(self) -> dict[str, Any]:
        """The plain parts as JSON-ready data (extra sections, which hold PNG bytes, are left out)."""
        return {
            "title": self.title,
            "rows": [dict(r) for r in self.rows],
            "clean": [dict(c) for c in self.clean],
            "skips": None if self.skips is None else [dict(s) for s in self.skips],
            "meta": dict(self.meta),
            "categories": dict(self.categories),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportData:
        """Inverse of `to_dict` (NaN written as ``null`` by JSON comes back as NaN)."""
        return cls.from_dicts(
            data.get("rows", ()),
            data.get("clean", ()),
            data.get("skips"),
            data.get("meta"),
            title=data.get("title", "Recovery report"),
            categories=data.get("categories"),
        )

    # ------------------------------------------------------------------ views used by sections and compare

    def category(self, intervention: str) -> str:
        """Category of ``intervention``: override, then a ``category`` column in the rows, then the registry."""
        if intervention in self.categories:
            return str(self.categories[intervention])
        if intervention in self._row_categories:
            return self._row_categories[intervention]
        return category_of(intervention)

    @cached_property
    def _row_categories(self) -> dict[str, str]:
        # Rows aggregated with ``category`` among the keys carry it; computed once, rows are immutable.
        return {str(r["intervention"]): str(r["category"]) for r in self.rows if r.get("category") in CATEGORIES}

    def row(self, model: str, domain: str, intervention: str, target_t: float) -> Mapping[str, Any] | None:
        """The row of one (model, domain, intervention, timestep) cell, or ``None``."""
        return self._index.get((model, domain, intervention, round(float(target_t), 9)))

    @cached_property
    def _index(self) -> dict[tuple, Mapping[str, Any]]:
        # Tables look up thousands of cells; a dict keeps that linear in the number of rows.
        return {(r["model"], r["domain"], r["intervention"], round(r["target_t"], 9)): r for r in self.rows}

    def domains(self) -> list[str]:
        """Domains in the order of ``meta["domains"]`` when it lists them (the paper's Math, Science,
        Logic), the rest sorted after."""
        return _ordered({str(r["domain"]) for r in self.rows}, self.meta.get("domains"))

    def models(self, domain: str | None = None) -> list[str]:
        """Models in the order of ``meta["models"]`` when it lists them, the rest sorted after."""
        present = {str(r["model"]) for r in self.rows if domain is None or r["domain"] == domain}
        return _ordered(present, self.meta.get("models"))

    def interventions(self, domain: str | None = None) -> list[str]:
        """Interventions ordered as the paper's tables: benign, neutral, adversarial, other; then registry order."""
        present = {str(r["intervention"]) for r in self.rows if domain is None or r["domain"] == domain}
        return order_interventions(present, self.category)

    def timesteps(self, domain: str | None = None) -> list[float]:
        return sorted({float(r["target_t"]) for r in self.rows if domain is None or r["domain"] == domain})

    def select(self, **key: Any) -> list[Mapping[str, Any]]:
        """Rows whose fields equal ``key`` (``target_t`` compared as float)."""
        # Most lookups are within one domain; starting from that domain's rows keeps tables and figures
        # fast at the paper's scale (~1000 rows, thousands of lookups).
        rows = self._by_domain.get(key.pop("domain"), ()) if "domain" in key else self.rows
        return [r for r in rows if all(_same(r.get(k), v) for k, v in key.items())]

    @cached_property
    def _by_domain(self) -> dict[str, list[Mapping[str, Any]]]:
        out: dict[str, list[Mapping[str, Any]]] = {}
        for r in self.rows:
            out.setdefault(r["domain"], []).append(r)
        return out


# ----------------------------------------------------------------------------------------------- helpers


def category_of(intervention: str) -> str:
    """The registry's category for ``intervention`` (benign/neutral/adversarial), ``"other"`` if unknown."""

    spec = INTERVENTIONS.get(intervention)
    return str(spec.category) if spec is not None else "other"


def order_interventions(names: Iterable[str], category=category_of) -> list[str]:
    """Sort by category (benign, neutral, adversarial, other), then registry order, then name."""

    registry_pos = {name: i for i, name in enumerate(INTERVENTIONS)}

    def key(name: str) -> tuple:
        cat = category(name)
        return (CATEGORIES.index(cat) if cat in CATEGORIES else len(CATEGORIES), registry_pos.get(name, 1 << 30), name)

    return sorted(set(names), key=key)


def pooled(rows: Sequence[Mapping[str, Any]], column: str, weight: str = "n_chains") -> float:
    """Mean of ``column`` over ``rows`` weighted by ``weight``, skipping missing cells; NaN if nothing is left.

    Weighting group means by their chain counts gives the mean over the pooled chains, so pooling over
    models or timesteps matches aggregating the chains directly (exact when every chain has the value).
    """
    total = weight_sum = 0.0
    for r in rows:
        v, w = r.get(column), r.get(weight, 1)
        if v is None or w is None or (isinstance(v, float) and math.isnan(v)) or w <= 0:
            continue
        total += float(v) * float(w)
        weight_sum += float(w)
    return total / weight_sum if weight_sum else math.nan


def _ordered(present: set[str], listed: Any) -> list[str]:
    first = [str(x) for x in dict.fromkeys(str(v) for v in _as_list(listed)) if str(x) in present]
    return first + sorted(present - set(first))


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        # Metadata is often pre-formatted for display ("m1, m2"); still read it as a list for ordering.
        return [part.strip() for part in value.split(",") if part.strip()]
    try:
        return list(value)
    except TypeError:
        return [value]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return a == b


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _normalize_row(row: Any, i: int) -> dict[str, Any]:
    if hasattr(row, "flat") and callable(row.flat):  # an AggregateRow
        row = row.flat()
    if not isinstance(row, Mapping):
        raise TypeError(f"aggregate row {i}: expected a dict or AggregateRow, got {type(row).__name__}")
    out = dict(row)
    for required in ("intervention", "target_t"):
        if out.get(required) is None:
            raise ValueError(f"aggregate row {i} has no {required!r}: {sorted(out)}")
    out["model"] = str(out.get("model", ALL) if out.get("model") is not None else ALL)
    out["domain"] = str(out.get("domain", ALL) if out.get("domain") is not None else ALL)
    out["intervention"] = str(out["intervention"])
    out["target_t"] = float(out["target_t"])
    n = out.get("n_chains")
    out["n_chains"] = int(n) if n is not None and not (isinstance(n, float) and math.isnan(n)) else 0
    for stat in STAT_NAMES:
        for suffix in STAT_SUFFIXES:
            name = f"{stat}_{suffix}"
            out[name] = _float(out.get(name))
    return out


def _normalize_clean(entry: Mapping[str, Any], i: int) -> dict[str, Any]:
    if "accuracy" not in entry:
        raise ValueError(f"clean-accuracy entry {i} has no 'accuracy': {sorted(entry)}")
    n = entry.get("n")
    return {
        **entry,
        "model": str(entry.get("model") or ALL),
        "domain": str(entry.get("domain") or ALL),
        "n": int(n) if n is not None and not (isinstance(n, float) and math.isnan(n)) else 0,
        "accuracy": _float(entry["accuracy"]),
    }


def _normalize_skip(entry: Mapping[str, Any], i: int) -> dict[str, Any]:
    if "count" not in entry:
        raise ValueError(f"skip entry {i} has no 'count': {sorted(entry)}")
    return {"stage": str(entry.get("stage", "")), "reason": str(entry.get("reason", "")), "count": int(entry["count"])}
