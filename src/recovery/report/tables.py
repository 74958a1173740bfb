"""The report's tables (paper Tables 5–6 and 18–20 and run bookkeeping) and their Markdown form.

Builders return `Table`s of already formatted strings, so Markdown and HTML show identical cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import recovery.report.fmt as fmt
from recovery.report.data import LEVELS, ReportData, Table, length_measure_text, pooled
from recovery.report.viewer_links import cell_url

LEVEL_LABELS: dict[str, str] = {"at_least_once": "At least once", "majority": "Majority", "all": "All"}


def intervention_label(data: ReportData, name: str) -> str:
    """``wikipedia_text (neutral)``, as the paper's Table 18 names an intervention with its category."""
    return f"{name} ({data.category(name)})"


# ------------------------------------------------------------------------------------------- robustness


def cell_figures(row: Mapping[str, Any]) -> list[str]:
    """The figures of one cell (an aggregate row) as the report's detail table shows them, under `cell_columns`:
    chains, each robustness level's mean ± std, the majority interval and the length change. The run viewer shows a
    cell with these very strings."""
    return [
        str(row["n_chains"]),
        *(fmt.mean_std(row[f"{lv}_mean"], row[f"{lv}_std"]) for lv in LEVELS),
        fmt.interval(row["majority_ci_low"], row["majority_ci_high"]),
        fmt.mean_std(row["whole_pct_mean"], row["whole_pct_std"], 1, sign=True),
    ]


def cell_columns(confidence: str = "95%") -> list[str]:
    """The column names of `cell_figures`."""
    return ["Chains", *(LEVEL_LABELS[lv] for lv in LEVELS), f"Majority {confidence} CI", "Length Δ %"]


def detail_table(data: ReportData, domain: str) -> Table:
    """Mean ± std of every level per (model, intervention, timestep), like Tables 18–20, with the CI."""
    conf = _confidence(data.meta)
    rows, links = [], []
    for model in data.models(domain):
        for iv in data.interventions(domain):
            for t in data.timesteps(domain):
                r = data.row(model, domain, iv, t)
                if r is None:
                    continue
                rows.append([model, intervention_label(data, iv), fmt.timestep(t), *cell_figures(r)])
                links.append(cell_url(model, domain, iv, t))
    return Table(
        title=f"Robustness (mean ± std) per model, intervention and timestep — {domain}",
        columns=["Model", "Intervention", "t", *cell_columns(conf)],
        rows=rows,
        align="lllr" + "r" * (len(LEVELS) + 2),
        caption=(
            "Std is the population std over chains (as in the paper's Tables 18–20); the robustness CI is a 95 % "
            "Wilson score interval over chains, the length CI a percentile bootstrap over chains: a cell holds one "
            "chain per problem, so its chains are its problems. Length Δ % is "
            + length_measure_text(data.length, "the whole CoT without the inserted text against the original")
            + "."
        ),
        collapsed=True,
        links=links if data.meta.get("run_dir") else (),  # a run's own report: each cell opens in the viewer
    )


def majority_pivot(data: ReportData, model: str, domain: str) -> Table:
    """Majority robustness of one model: intervention × timestep, with the chain-weighted mean over timesteps."""
    ts = data.timesteps(domain)
    rows = []
    for iv in data.interventions(domain):
        cells = [data.row(model, domain, iv, t) for t in ts]
        present = [c for c in cells if c is not None]
        if not present:
            continue
        rows.append(
            [intervention_label(data, iv)]
            + [fmt.num(c["majority_mean"]) if c is not None else fmt.MISSING for c in cells]
            + [fmt.num(pooled(present, "majority_mean"))]
        )
    return Table(
        title=f"Majority robustness of {model} — {domain}",
        columns=["Intervention", *(f"t={fmt.timestep(t)}" for t in ts), "Mean"],
        rows=rows,
        align="l" + "r" * (len(ts) + 1),
    )


def majority_by_model(data: ReportData, domain: str) -> Table:
    """Majority robustness per model × intervention, pooled over timesteps (the bars of the paper's Figs. 3–4)."""
    return _pooled_by_intervention(
        data,
        domain,
        "Model",
        [(model, {"model": model}) for model in data.models(domain)],
        "majority_mean",
        fmt.num,
        title=f"Majority robustness by model and intervention (mean over timesteps) — {domain}",
        caption="Means over timesteps are weighted by the number of chains.",
    )


# ------------------------------------------------------------------------------------------------ length


def length_by_model(data: ReportData, domain: str) -> Table:
    """Table 5: % change in CoT length per model × intervention, pooled over timesteps."""
    return _pooled_by_intervention(
        data,
        domain,
        "Model",
        [(model, {"model": model}) for model in data.models(domain)],
        "whole_pct_mean",
        fmt.signed,
        title=f"CoT length change (%) by model and intervention — {domain}",
        caption="Like the paper's Table 5: "
        + length_measure_text(
            data.length, "whole CoT with the inserted text removed, against the same trace's original CoT"
        )
        + "; positive = longer. Pooled over timesteps, weighted by chains.",
    )


def length_by_timestep(data: ReportData, domain: str) -> Table:
    """Table 6: % change in CoT length per timestep × intervention, pooled over models."""
    return _pooled_by_intervention(
        data,
        domain,
        "t",
        [(fmt.timestep(t), {"target_t": t}) for t in data.timesteps(domain)],
        "whole_pct_mean",
        fmt.signed,
        title=f"CoT length change (%) by timestep and intervention — {domain}",
        caption="Like the paper's Table 6. Pooled over models, weighted by chains.",
    )


def _pooled_by_intervention(
    data: ReportData,
    domain: str,
    first_column: str,
    groups: Sequence[tuple[str, Mapping[str, Any]]],
    column: str,
    show: Callable[[float], str],
    *,
    title: str,
    caption: str,
) -> Table:
    """One row per group (its label, then the key its rows are selected by), one column per intervention:
    ``column`` pooled over the group's rows of that intervention (weighted by chains), shown by ``show``."""
    ivs = data.interventions(domain)
    rows = [
        [label, *(show(pooled(data.select(domain=domain, intervention=iv, **key), column)) for iv in ivs)]
        for label, key in groups
    ]
    return Table(
        title=title,
        columns=[first_column, *(intervention_header(data, iv) for iv in ivs)],
        rows=rows,
        align="l" + "r" * len(ivs),
        caption=caption,
    )


def intervention_header(data: ReportData, name: str) -> str:
    """Column header naming the category first, as the paper's Tables 5–6 do (``adversarial: wrong_continuation``)."""
    return f"{data.category(name)}: {name}"


# ------------------------------------------------------------------------------------------- bookkeeping


def clean_table(data: ReportData) -> Table:
    """Un-intervened accuracy per model and domain."""
    rows = [
        [c["model"], c["domain"], str(c["n"]) if c["n"] else fmt.MISSING, fmt.num(c["accuracy"])] for c in data.clean
    ]
    return Table(
        title="Clean accuracy (no intervention)",
        columns=["Model", "Domain", "n", "Accuracy"],
        rows=rows,
        align="llrr",
    )


def skips_table(skips: Sequence[Mapping[str, Any]]) -> Table:
    """Skipped items per stage and reason, in the order given (pipeline stage order), with a total."""
    rows = [[s["stage"], s["reason"], str(s["count"])] for s in skips]
    rows.append(["total", "", str(sum(int(s["count"]) for s in skips))])
    return Table(title="Skipped items", columns=["Stage", "Reason", "Count"], rows=rows, align="llr")


def metadata_table(meta: Mapping[str, Any]) -> Table:
    """Run metadata as key/value rows; nested dicts flattened to dotted keys, lists joined with commas."""
    return Table(
        title="Run metadata",
        columns=["Key", "Value"],
        rows=[[k, v] for k, v in _flatten(meta)],
        align="ll",
    )


def _flatten(meta: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    for key, value in meta.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if value:
                yield from _flatten(value, f"{name}.")
            else:
                yield name, fmt.MISSING
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
            yield name, ", ".join(_scalar(v) for v in items) if items else fmt.MISSING
        else:
            yield name, _scalar(value)


def _scalar(value: Any) -> str:
    if fmt.is_missing(value):
        return fmt.MISSING
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _confidence(meta: Mapping[str, Any]) -> str:
    """The CI level for headers: ``meta["confidence"]`` (or ``meta["config"]["confidence"]``), 95 % by default."""
    conf = meta.get("confidence")
    if conf is None and isinstance(meta.get("config"), Mapping):
        conf = meta["config"].get("confidence")
    try:
        return f"{100 * float(conf if conf is not None else 0.95):g}%"
    except (TypeError, ValueError):
        return "95%"


# ------------------------------------------------------------------------------------------------ render


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown pipe table with a bold title and an italic caption."""
    align = table.align or "l" * len(table.columns)
    lines = [f"**{_md_escape(table.title)}**", ""]
    if not table.rows:
        return "\n".join([*lines, "_No rows._"])
    lines.append("| " + " | ".join(_md_escape(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if a == "r" else ":---" for a in align) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_escape(fmt.cell(v)) for v in row) + " |")
    if table.caption:
        lines += ["", f"*{_md_escape(table.caption)}*"]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    # A pipe would end the cell and a newline the row; everything else is left for Markdown to render.
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")
