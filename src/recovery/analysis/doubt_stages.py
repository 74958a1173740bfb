"""Doubt after the intervention across the stages of one model (base → SFT → SFT+GRPO): the paper's Fig. 5
before and after training, from the `recovery.analysis.doubt_result.DoubtResult` of each stage's run.

Each stage's counts come from `recovery.analysis.doubt_curve.analyze_doubt` on that stage's benchmark run
(same problems, interventions and timesteps), so the stages differ only by the model. Per intervention and
stage the section gives the doubt rate over every classified sentence of the window after the intervention
(up to ``DoubtResult.sentences``), split by whether the continuation was graded correct ("recovered"), and
the stage's clean baseline (random windows of its own unperturbed traces). A doubt rate pools sentences,
so a long continuation weighs more than a short one, as in the paper.

Whether paraphrase suppresses doubt (the paper: 0.068–0.076 against a 0.153 baseline) is read off the
paraphrase row against the baseline of the same stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recovery.analysis.doubt_result import PAPER_BASELINE, DoubtResult, rate
from recovery.report.data import Figure, Section, Table, order_interventions
from recovery.report.figures import category_color, figure_style, new_figure, padded_ylim, to_png

__all__ = [
    "PAPER_PARAPHRASE",
    "StageDoubt",
    "doubt_rows",
    "doubt_stages_figure",
    "doubt_stages_lines",
    "doubt_stages_section",
]

TITLE = "Doubt after the intervention, by training stage"
PAPER_PARAPHRASE = (0.068, 0.076)  # §4.2: paraphrased prefixes and the reasoning after them
PARAPHRASE = "paraphrase"  # an intervention whose name ends with this is the paraphrase row


@dataclass(frozen=True)
class StageDoubt:
    """One stage's label (e.g. "base", "SFT", "SFT+GRPO") and the doubt counts of its run."""

    label: str
    result: DoubtResult

    def rate(self, intervention: str | None = None, recovered: bool | None = None) -> tuple[float, int]:
        """``(doubt rate, sentences)`` over the whole window after ``intervention`` (None: all)."""
        curve = self.result.curve(intervention=intervention, recovered=recovered)
        return rate(curve), sum(n for n, _ in curve)

    def continuations(self, intervention: str | None = None, recovered: bool | None = None) -> int:
        return self.result.n_windows(intervention=intervention, recovered=recovered)


def _interventions(stages: Sequence[StageDoubt]) -> list[str]:
    names = {iv for s in stages for iv in s.result.interventions()}
    category = {iv: s.result.category(iv) for s in stages for iv in s.result.interventions()}
    return order_interventions(names, lambda iv: category.get(iv, "other"))


def doubt_rows(stages: Sequence[StageDoubt]) -> list[dict]:
    """One dict per (intervention, stage): ``intervention``, ``category``, ``stage``, ``continuations``,
    ``recovered`` (share graded correct), ``doubt`` / ``doubt_recovered`` / ``doubt_not_recovered`` (rates,
    NaN without sentences) with their ``sentences*`` counts, and ``baseline`` (the stage's clean rate)."""
    rows = []
    for iv in _interventions(stages):
        for s in stages:
            n = s.continuations(iv)
            if not n:
                continue
            doubt, sentences = s.rate(iv)
            rec, rec_n = s.rate(iv, recovered=True)
            not_rec, not_rec_n = s.rate(iv, recovered=False)
            rows.append(
                {
                    "intervention": iv,
                    "category": s.result.category(iv),
                    "stage": s.label,
                    "continuations": n,
                    "recovered": s.continuations(iv, recovered=True) / n,
                    "doubt": doubt,
                    "sentences": sentences,
                    "doubt_recovered": rec,
                    "sentences_recovered": rec_n,
                    "doubt_not_recovered": not_rec,
                    "sentences_not_recovered": not_rec_n,
                    "baseline": s.result.baseline_rate(),
                }
            )
    return rows


def _r(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.3f}"


def _paraphrase(stages: Sequence[StageDoubt]) -> str | None:
    return next((iv for iv in _interventions(stages) if iv.endswith(PARAPHRASE)), None)


def doubt_stages_lines(stages: Sequence[StageDoubt]) -> list[str]:
    """The headline per stage, one line each: the clean baseline, doubt after the interventions
    (recovered vs not), and paraphrase against the baseline."""
    para = _paraphrase(stages)
    lines = []
    for s in stages:
        base = s.result.baseline_rate()
        doubt, n = s.rate()
        rec, _ = s.rate(recovered=True)
        not_rec, _ = s.rate(recovered=False)
        text = (
            f"{s.label}: doubt after the intervention {_r(doubt) or 'n/a'} over {n} sentences "
            f"(recovered {_r(rec) or 'n/a'}, not recovered {_r(not_rec) or 'n/a'}) vs clean baseline "
            f"{_r(base) or 'n/a'}"
        )
        if para is not None and s.continuations(para):
            p, _ = s.rate(para)
            text += f"; {para} {_r(p) or 'n/a'}, {_suppression_verdict(p, base)}"
        lines.append(text)
    return lines


def _suppression_verdict(paraphrase: float, baseline: float) -> str:
    """Whether the paraphrase rate is below the clean baseline, or why that cannot be read: a stage that
    never doubts in its clean traces has nothing a paraphrase could suppress."""
    if math.isnan(paraphrase) or math.isnan(baseline):
        return "no rate to compare with the baseline"
    if baseline == 0:
        return "the clean baseline has no doubt, so suppression cannot show"
    return "below the baseline" if paraphrase < baseline else "not below the baseline"


def _table(stages: Sequence[StageDoubt]) -> Table:
    rows = [
        (
            r["intervention"],
            r["category"],
            r["stage"],
            r["continuations"],
            f"{r['recovered']:.0%}",
            _r(r["doubt"]),
            _r(r["doubt_recovered"]),
            _r(r["doubt_not_recovered"]),
            _r(r["baseline"]),
        )
        for r in doubt_rows(stages)
    ]
    for s in stages:
        doubt, _ = s.rate()
        rows.append(
            (
                "all interventions",
                "",
                s.label,
                s.continuations(),
                f"{s.continuations(recovered=True) / max(1, s.continuations()):.0%}",
                _r(doubt),
                _r(s.rate(recovered=True)[0]),
                _r(s.rate(recovered=False)[0]),
                _r(s.result.baseline_rate()),
            )
        )
    n = max((s.result.sentences for s in stages), default=0)
    return Table(
        "Doubt rate after the intervention, per intervention and stage",
        [
            "intervention",
            "category",
            "stage",
            "continuations",
            "recovered",
            "doubt",
            "doubt (recovered)",
            "doubt (not recovered)",
            "clean baseline",
        ],
        rows,
        align=["l", "l", "l"] + ["r"] * 6,
        caption=f"Doubtful / classified sentences over the first {n} sentences after the intervention "
        "(the continuation's reasoning); recovered = graded correct; clean baseline = random windows of the "
        f"same stage's unperturbed traces (the paper's LLM judge: {PAPER_BASELINE}).",
    )


def _draw(stages: Sequence[StageDoubt]):
    ivs = _interventions(stages)
    width = 0.8 / max(1, len(stages))
    hatches = ("", "//", "..", "xx")
    with figure_style():
        fig = new_figure(figsize=(max(5.0, 1.1 * len(ivs) + 2.0), 3.4), layout="constrained")
        ax = fig.subplots()
        top = 0.05
        for k, s in enumerate(stages):
            xs = [i + (k - (len(stages) - 1) / 2) * width for i in range(len(ivs))]
            ys = [s.rate(iv)[0] for iv in ivs]
            colors = [category_color(s.result.category(iv)) for iv in ivs]
            ax.bar(
                xs,
                [0.0 if math.isnan(y) else y for y in ys],
                width=width * 0.95,
                color=colors,
                edgecolor="black",
                linewidth=0.5,
                hatch=hatches[k % len(hatches)],
                label=s.label,
            )
            base = s.result.baseline_rate()
            if not math.isnan(base):
                ax.hlines(base, -0.5, len(ivs) - 0.5, colors="black", linestyles=("--", ":", "-.")[k % 3])
                ax.annotate(  # one label above another when the stages' baselines coincide
                    f"{s.label} baseline {base:.3f}",
                    (len(ivs) - 0.5, base),
                    xytext=(0, 2 + 8 * k),
                    textcoords="offset points",
                    fontsize=6,
                    ha="right",
                )
            top = max([top, base if not math.isnan(base) else 0.0, *(y for y in ys if not math.isnan(y))])
        ax.set_xticks(range(len(ivs)))
        ax.set_xticklabels([iv.split("/")[-1] for iv in ivs], rotation=30, ha="right")
        ax.set_ylabel(f"doubt rate ({stages[0].result.detector})" if stages else "doubt rate")
        ax.set_ylim(*padded_ylim(0.0, min(1.0, top * 1.15)))
        ax.grid(True, axis="y", color="#e6e6e6", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.legend(loc="upper left", frameon=False, fontsize=7)
        fig.suptitle("Doubt after the intervention by stage (paper Fig. 5)", fontsize=10)
    return fig


def doubt_stages_figure(stages: Sequence[StageDoubt]) -> Figure:
    """Bars per intervention (one per stage, coloured by category) with each stage's clean baseline."""
    with figure_style():
        png = to_png(_draw(stages))
    return Figure(
        "doubt_by_stage",
        png,
        "Share of doubtful sentences after the intervention, per intervention and stage; lines: each stage's "
        "baseline on its unperturbed traces.",
    )


def doubt_stages_section(stages: Sequence[StageDoubt]) -> Section:
    """The section: how doubt is counted, the headline per stage, the figure and the table."""
    stages = [s for s in stages if s.result.cells or s.result.baseline]
    if not stages:
        return Section(TITLE, "No stage has doubt counts (no graded continuations or traces).")
    first = stages[0].result
    prose = [
        f"Each of the first {first.sentences} sentences after the intervention point is classified by the "
        f"**{first.detector}** doubt detector; the rate is doubtful / classified sentences. The clean "
        "baseline is the same detector on random windows of each stage's own unperturbed traces. The paper "
        f"(LLM judge) measured a {PAPER_BASELINE} baseline, and {PAPER_PARAPHRASE[0]}–{PAPER_PARAPHRASE[1]} "
        "around paraphrase: rewriting the reasoning removes its hedging, and the model keeps that style.",
        "\n".join(f"- {line}" for line in doubt_stages_lines(stages)),
    ]
    return Section(TITLE, "\n\n".join(prose), figures=(doubt_stages_figure(stages),), tables=(_table(stages),))
