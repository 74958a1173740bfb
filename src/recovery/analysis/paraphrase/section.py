"""The report section "Paraphrase quality"."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from recovery.analysis.paraphrase.constants import (
    GENERATION_ERROR,
    PAPER_TABLE14,
    SECTION_TITLE,
    UNPARSEABLE,
)
from recovery.analysis.paraphrase.judge import ParaphraseCheckConfig
from recovery.analysis.paraphrase.rates import EquivalenceRate, equivalence_rates
from recovery.data.skips import Skips
from recovery.report.data import Section, Table


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def _rate_rows(rates: Sequence[EquivalenceRate], available: Mapping[str, int] | None = None) -> list[tuple]:
    out = []
    for r in rates:
        avail = (sum(available.values()) if r.group == "all" else available.get(r.group, 0)) if available else "–"
        out.append(
            (
                r.group,
                avail,
                r.n,
                r.yes,
                r.no,
                r.unparseable,
                r.errors,
                _pct(r.rate),
                f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}]",
                _pct(r.rate_parsed),
            )
        )
    return out


_RATE_COLUMNS = [
    "Chains available",
    "Judged",
    "Yes",
    "No",
    "Unparseable",
    "Gen. errors",
    "Equivalent (%)",
    "95 % CI (%)",
    "Yes / (Yes + No) (%)",
]


def paraphrase_section(
    rows: Sequence[Mapping[str, Any]],
    *,
    config: ParaphraseCheckConfig | None = None,
    n_available: Mapping[str, int] | None = None,
    skips: Skips | None = None,
) -> Section:
    """The "Paraphrase quality" section: equivalence rate per domain (and per model), the paper's
    Table 14, chains that could not be checked and the judge's unreadable replies."""
    judge = config.judge.name if config else "the judge"
    per_domain = config.per_domain if config else "up to 100"
    prose = (
        f"An LLM judge ({judge}) saw the problem, the original reasoning prefix (the trace's steps up to the "
        "cut) and its paraphrase, and answered whether both contain logically equivalent reasoning steps "
        f"(paper App. D.4, Table 14; the prompt is ours, the paper does not print one). {per_domain} chains "
        "per domain were sampled (seeded). The rate counts Yes over every judged chain, so unparseable "
        "replies and generation errors count as not equivalent; the last column leaves them out."
    )
    if not rows:
        prose += "\n\n_No paraphrase chain was judged (none in this run, or none could be rebuilt)._"
    tables: list[Table] = [
        Table(
            "Equivalence rate per domain",
            ["Domain", *_RATE_COLUMNS],
            _rate_rows(equivalence_rates(rows), n_available),
            align=["l", *["r"] * len(_RATE_COLUMNS)],
            caption="95 % Wilson intervals.",
        ),
    ]
    by_model = equivalence_rates(rows, key=lambda r: f"{r['domain']} / {r['model']}", pooled=False)
    if len({r["model"] for r in rows}) > 1:
        tables.append(
            Table(
                "Per domain and model",
                ["Domain / model", *_RATE_COLUMNS[1:]],
                [row[:1] + row[2:] for row in _rate_rows(by_model)],
                align=["l", *["r"] * (len(_RATE_COLUMNS) - 1)],
            )
        )
    tables.append(
        Table(
            "The paper's Table 14 (GPT-5.1 judge, 100 traces per domain)",
            ["Domain", "Equivalent (%)"],
            [(d.capitalize(), f"{100 * v:.0f}") for d, v in PAPER_TABLE14.items()],
            align=["l", "r"],
        )
    )
    bad = [r for r in rows if r["verdict"] in (UNPARSEABLE, GENERATION_ERROR)]
    if bad:
        tables.append(
            Table(
                "Replies not read as Yes or No",
                ["Chain", "Domain", "Verdict", "Detail"],
                [(r["chain_id"], r["domain"], r["verdict"], r["detail"]) for r in bad[:50]],
                caption=f"{len(bad)} in all (first 50 shown).",
                collapsed=True,
            )
        )
    if skips is not None and skips.total:
        tables.append(
            Table("Paraphrase chains that could not be checked", ["Reason", "Count", "Examples"], skips.table_rows())
        )
    return Section(SECTION_TITLE, prose, tables=tuple(tables))
