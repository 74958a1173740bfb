"""The report section "Doubt after the intervention": Fig. 5-style curves and the tables behind them.

Built from a `recovery.analysis.doubt_result.DoubtResult` alone (so it can be rebuilt from the stored
``summary.json``). Rates are doubtful / classified sentences at each sentence index; cells with no
sentence are left blank (a short continuation has fewer than 20 sentences). Figures use the report's
style (`recovery.report.figures`): deterministic PNG bytes for the same numbers.
"""

from __future__ import annotations

import math

from recovery.analysis.doubt_figures import doubt_figures
from recovery.analysis.doubt_result import PAPER_BASELINE, DoubtResult, rate
from recovery.plan import unit_rules
from recovery.report.data import Section, Table

__all__ = ["doubt_section", "protocol_text"]

TITLE = "Doubt after the intervention"
EARLY = 5  # the paper: doubt returns to baseline within about five sentences


def _r(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.3f}"


def _span(curve: list[tuple[int, int]], lo: int, hi: int) -> float:
    return rate(curve[lo - 1 : hi])


def _summary_table(result: DoubtResult) -> Table:
    n = result.sentences
    late = f"doubt @{EARLY + 1}–{n}" if n > EARLY else f"doubt @{n}"
    columns = [
        "model",
        "intervention",
        "category",
        "continuations",
        "recovered",
        "doubt @1",
        f"doubt @1–{min(EARLY, n)}",
        late,
        f"@1–{min(EARLY, n)} recovered",
        f"@1–{min(EARLY, n)} not recovered",
    ]
    rows = []
    models = result.models()
    keys = [(m, iv) for m in models for iv in result.interventions()]
    if len(models) > 1:
        keys += [(None, iv) for iv in result.interventions()]
    for m, iv in keys:
        windows = result.n_windows(model=m, intervention=iv)
        if not windows:
            continue
        curve = result.curve(model=m, intervention=iv)
        early = min(EARLY, n)
        rows.append(
            (
                m or "all models",
                iv,
                result.category(iv),
                windows,
                f"{result.n_windows(model=m, intervention=iv, recovered=True) / windows:.0%}",
                _r(_span(curve, 1, 1)),
                _r(_span(curve, 1, early)),
                _r(_span(curve, early + 1, n) if n > EARLY else _span(curve, n, n)),
                _r(_span(result.curve(model=m, intervention=iv, recovered=True), 1, early)),
                _r(_span(result.curve(model=m, intervention=iv, recovered=False), 1, early)),
            )
        )
    return Table(
        "Doubt rate after the intervention, per model and intervention",
        columns,
        rows,
        align=["l", "l", "l"] + ["r"] * 7,
        caption=f"Rates are doubtful / classified sentences at those indices; baseline "
        f"{_r(result.baseline_rate()) or 'n/a'}.",
    )


def _index_table(result: DoubtResult) -> Table:
    ivs, models = result.interventions(), result.models()
    groups: list[tuple[str, list[tuple[int, int]]]] = [("all", result.curve())]
    groups += [(iv, result.curve(intervention=iv)) for iv in ivs]
    if len(models) > 1:
        groups += [(m, result.curve(model=m)) for m in models]
    groups += [("recovered", result.curve(recovered=True)), ("not recovered", result.curve(recovered=False))]
    total = result.curve()
    rows = [(i, total[i - 1][0], *(_r(rate([c[i - 1]])) for _, c in groups)) for i in range(1, result.sentences + 1)]
    return Table(
        "Doubt rate by sentence index",
        ["index", "sentences", *(g for g, _ in groups)],
        rows,
        align=["r"] * (2 + len(groups)),
        collapsed=True,
        caption="Index 1 is the first sentence after the intervention point; 'sentences' counts the "
        "classified sentences at that index over all continuations.",
    )


def _baseline_table(result: DoubtResult) -> Table:
    rows = []
    models = [m for m in result.models() if result.baseline_traces.get(m)]
    for m in models + ([None] if len(models) > 1 else []):
        n, k = result.baseline_counts(m)
        traces = sum(result.baseline_traces.values()) if m is None else result.baseline_traces[m]
        short = sum(result.baseline_short.values()) if m is None else result.baseline_short[m]
        rows.append((m or "all models", traces, short, n, k, _r(k / n if n else math.nan)))
    return Table(
        "Baseline: doubt in unperturbed reasoning",
        ["model", "traces", f"shorter than {result.sentences} sentences", "sentences", "doubtful", "rate"],
        rows,
        align=["l"] + ["r"] * 5,
        caption=f"One random window of {result.sentences} consecutive sentences per trace "
        f"({result.baseline_source}; seed {result.seed}); a shorter trace contributes all its "
        f"sentences. The paper's baseline (LLM judge): {PAPER_BASELINE}.",
    )


def _skips_table(result: DoubtResult) -> Table | None:
    if not result.skips:
        return None
    rows = []
    for (stage, reason), count in sorted(result.skips.items()):
        example = result.examples.get(reason.removeprefix("detector:"), "") if reason.startswith("detector:") else ""
        rows.append((stage, reason, count, example[:120]))
    return Table(
        "Skipped items",
        ["part", "reason", "count", "example reply"],
        rows,
        align=["l", "l", "r", "l"],
        caption="Continuations without a grade or sentences, traces without reasoning, and sentences the "
        "detector gave no verdict for; none of them enters a rate.",
    )


# How each sentence splitter (`recovery.doubt.SENTENCE_SPLITTERS`) is described (a style's units: `UnitRules`).
_SPLITTER_TEXT = {
    "reference": "Sentences are split by the **reference** splitter, as in the authors' reference implementation: "
    "spaCy's rule-based sentencizer inside blank-line segments (`recovery.doubt`, splitter `reference`).",
    "default": "Sentences are split by the project's **default** splitter (`recovery.doubt.split_sentences`), where "
    "a line break also ends a sentence, so display-math lines count as (non-doubtful) sentences; rates "
    "are therefore not directly comparable with the paper's numbers (the `reference` splitter follows "
    "the authors' code).",
}


def protocol_text(result: DoubtResult) -> str:
    """Which sentence splitter and grading protocol produced the numbers (so they can be compared fairly)."""
    split = _SPLITTER_TEXT[result.splitter] + unit_rules(result.protocol, result.splitter).description
    graded = (
        f"*Recovered* means graded correct by the run's grading protocol: {result.grading}."
        if result.grading
        else "The run's grading protocol, on which *recovered* rests, is unknown (no run config)."
    )
    return f"{split} {graded} Per-sentence labels: `analysis/doubt/sentences.parquet`."


def doubt_section(result: DoubtResult) -> Section:
    """The "Doubt after the intervention" section for ``result``."""
    base_n, base_k = result.baseline_counts()
    total = result.curve()
    n_sent = sum(p[0] for p in total)
    source = unit_rules(result.protocol, result.splitter).window_source
    lines = [
        (
            f"Each of the first {result.sentences} sentences after the intervention point ({source}) is "
            f"classified by the **{result.detector}** doubt detector "
            "(paper §4.2; the paper used an LLM judge, App. D.2). The doubt rate at index *i* is the share of "
            "doubtful sentences among the continuations that have an *i*-th sentence."
        )
    ]
    if base_n:
        lines.append(
            f"**Baseline** (unperturbed reasoning, random {result.sentences}-sentence windows, seed {result.seed}): "
            f"**{base_k / base_n:.3f}** ({base_k} of {base_n} sentences in {sum(result.baseline_traces.values())} "
            f"traces); the paper measured {PAPER_BASELINE} with its LLM judge."
        )
    elif result.baseline_traces:
        lines.append(
            f"No baseline: the detector gave no verdict on any sentence of the "
            f"{sum(result.baseline_traces.values())} traces' windows (see the skipped items)."
        )
    else:
        lines.append("No baseline: the run has no original traces with reasoning.")
    if result.cells:
        early = min(EARLY, result.sentences)
        rec = _span(result.curve(recovered=True), 1, early)
        not_rec = _span(result.curve(recovered=False), 1, early)
        lines.append(
            f"After the intervention: {n_sent} sentences in {result.n_windows()} graded continuations; doubt rate "
            f"{_r(_span(total, 1, 1)) or 'n/a'} at the first sentence and {_r(_span(total, 1, early)) or 'n/a'} over "
            f"sentences 1–{early}; over sentences 1–{early} {_r(rec) or 'n/a'} in recovered (correct) continuations "
            f"vs {_r(not_rec) or 'n/a'} in the others."
        )
    elif result.windows:
        lines.append(
            f"{result.n_windows()} graded continuations, but the detector gave no verdict on any of their "
            "sentences (see the skipped items)."
        )
    else:
        lines.append("No graded continuations in this run: only the baseline is shown.")
    lines.append(protocol_text(result))
    skipped = sum(result.skips.values())
    if skipped:
        lines.append(f"Skipped: {skipped} item(s), see the table below.")
    tables: list[Table] = []
    if result.cells:
        tables += [_summary_table(result), _index_table(result)]
    if base_n:
        tables.append(_baseline_table(result))
    skips = _skips_table(result)
    if skips is not None:
        tables.append(skips)
    return Section(TITLE, "\n\n".join(lines), figures=tuple(doubt_figures(result)), tables=tuple(tables))
