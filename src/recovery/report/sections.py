"""The standard sections of a run report, built from `ReportData`.

Each builder returns one `Section`; a part with no data yields a short note instead of failing, so a
partial run (say, clean accuracy only) still produces a readable report.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import recovery.report.figures as figures
import recovery.report.fmt as fmt
import recovery.report.tables as tables
from recovery.report.data import ReportData, Section, length_measure_text, pooled
from recovery.report.viewer_links import how_to_view

NO_ROWS = "_No aggregate rows: no intervened chain has been graded yet, so there is nothing to show._"
# The metadata key saying why a run measured nothing (`recovery.pipeline.outcome`), shown instead of NO_ROWS.
OUTCOME = "nothing measured"


def no_rows(data: ReportData) -> str:
    """What a section without aggregate rows says: why the run measured nothing when it is known."""
    if data.meta.get(OUTCOME):
        return f"**Nothing was measured**: {data.meta[OUTCOME]}."
    return NO_ROWS


def standard_sections(data: ReportData) -> list[Section]:
    """Overview, clean accuracy, majority robustness, all levels, length change, detail tables, skips."""
    return [
        overview_section(data),
        clean_section(data),
        majority_section(data),
        levels_section(data),
        length_section(data),
        detail_section(data),
        skips_section(data),
    ]


def overview_section(data: ReportData) -> Section:
    """What was measured, the headline numbers, and the run metadata."""
    lines = []
    if data.rows:
        n_chains = sum(r["n_chains"] for r in data.rows)
        lines.append(
            f"{n_chains} intervened chains in {len(data.rows)} groups: "
            f"{len(data.models())} model(s), {len(data.domains())} domain(s) ({', '.join(data.domains())}), "
            f"{len(data.interventions())} intervention(s), timesteps "
            f"{', '.join(fmt.timestep(t) for t in data.timesteps())}."
        )
        lines.append("")
        for domain in data.domains():
            for model in data.models(domain):
                rows = data.select(model=model, domain=domain)
                by_cat = {}
                for iv in data.interventions(domain):
                    by_cat.setdefault(data.category(iv), []).extend(r for r in rows if r["intervention"] == iv)
                parts = [f"{cat} {fmt.num(pooled(rs, 'majority_mean'))}" for cat, rs in by_cat.items()]
                lines.append(
                    f"- **{model}** on {domain}: majority robustness {fmt.num(pooled(rows, 'majority_mean'))} "
                    f"({'; '.join(parts)}); length change {fmt.signed(pooled(rows, 'whole_pct_mean'))} %"
                )
        lines += [
            "",
            (
                "Robustness levels (paper §3.3): a chain's N continuations with K correct are *at least once* "
                "robust if K ≥ 1, *majority* robust if K ≥ ⌊N/2⌋+1, *all* robust if K = N. Interventions are "
                "coloured by category: benign green, neutral blue, adversarial red."
            ),
        ]
    else:
        lines.append(no_rows(data))
    if data.meta.get("warnings"):
        lines += ["", f"**Not measured**: {data.meta['warnings']}."]
    if data.meta.get("grading"):  # which grading protocol produced the verdicts (the project's or the authors')
        lines += ["", f"Grading: {data.meta['grading']}."]
    tabs = [tables.metadata_table(data.meta)] if data.meta else []
    return Section("Overview", "\n".join(lines), tables=tabs)


def clean_section(data: ReportData) -> Section:
    """Accuracy without intervention: the ceiling robustness is measured against."""
    if not data.clean:
        return Section("Clean accuracy", "_No clean (un-intervened) accuracy was measured._")
    return Section(
        "Clean accuracy",
        "Accuracy of the original, un-intervened generations.",
        tables=[tables.clean_table(data)],
    )


def majority_section(data: ReportData) -> Section:
    """Per domain: the Fig. 2-style figure, the model × intervention summary and one pivot per model."""

    def domain_section(domain: str) -> Section:
        fig = figures.robustness_figure("majority", data, domain)
        tabs = [tables.majority_by_model(data, domain)]
        tabs += [tables.majority_pivot(data, model, domain) for model in data.models(domain)]
        return Section(f"Majority robustness — {domain}", figures=[fig] if fig else [], tables=tabs)

    return _per_domain(
        data,
        "Majority robustness vs timestep",
        "Share of intervened chains for which a majority of the sampled continuations reach the correct "
        "answer (paper Fig. 2), per intervention and timestep.",
        domain_section,
    )


def levels_section(data: ReportData) -> Section:
    """Per domain: at-least-once, majority and all robustness together (paper Figs. 6–11)."""

    def domain_section(domain: str) -> Section:
        fig = figures.robustness_figure("levels", data, domain)
        return Section(f"Robustness levels — {domain}", figures=[fig] if fig else [])

    return _per_domain(
        data,
        "All robustness levels",
        "The three strictness levels side by side; the gap between *at least once* and *all* shows how "
        "much recovery depends on the sample.",
        domain_section,
    )


def length_section(data: ReportData) -> Section:
    """Per domain: the length-change heatmap and Tables 5–6."""
    title = "CoT length change"
    if data.rows and all(math.isnan(r["whole_pct_mean"]) for r in data.rows):
        return Section(title, "_Lengths were not measured in this run (no length-change values)._")

    def domain_section(domain: str) -> Section:
        fig = figures.length_figure(data, domain)
        if fig is None:
            return Section(f"Length change — {domain}", "_No length-change values for this domain._")
        return Section(
            f"Length change — {domain}",
            figures=[fig],
            tables=[tables.length_by_model(data, domain), tables.length_by_timestep(data, domain)],
        )

    return _per_domain(
        data,
        title,
        "Percentage change in chain-of-thought length after an intervention, measured "
        + length_measure_text(
            data.length,
            "as in the paper (§4.3): the whole intervened CoT with the inserted text removed, against the original "
            "CoT of the same trace",
            "as ",
        )
        + ". Positive values are recovery overhead.",
        domain_section,
    )


def _per_domain(data: ReportData, title: str, intro: str, domain_section: Callable[[str], Section]) -> Section:
    """A section of one subsection per domain (``domain_section(domain)``), or the no-rows note."""
    if not data.rows:
        return Section(title, no_rows(data))
    return Section(title, intro, subsections=[domain_section(domain) for domain in data.domains()])


def detail_section(data: ReportData) -> Section:
    """Per domain: the mean ± std table of every cell (paper Tables 18–20)."""
    title = "Detailed statistics"
    if not data.rows:
        return Section(title, no_rows(data))
    intro = "Every (model, intervention, timestep) cell with its number of chains."
    if data.meta.get("run_dir"):
        intro += " " + how_to_view(str(data.meta["run_dir"]))
    return Section(title, intro, tables=[tables.detail_table(data, domain) for domain in data.domains()])


def skips_section(data: ReportData) -> Section:
    """Items the pipeline skipped, with reasons, so losses are visible."""
    if data.skips is None:
        return Section("Skipped items", "_No skip summary was provided._")
    if not data.skips:
        return Section("Skipped items", "No item was skipped.")
    return Section("Skipped items", tables=[tables.skips_table(data.skips)])
