"""The "Activation probes" section (and the paper's Fig. 12), rebuilt from every model probed so far."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recovery.analysis.activation_probes.config import ANALYSIS_NAME, SECTION_TITLE
from recovery.report.data import Figure, Section, Table
from recovery.report.sections_store import analysis_dir


def _stored_results(run_dir: str | Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    import pyarrow.parquet as pq

    root = analysis_dir(run_dir, ANALYSIS_NAME)
    results = []
    for meta_path in sorted(root.glob("*/probes.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        acc_path = meta_path.parent / "accuracies.parquet"
        rows = pq.read_table(acc_path).to_pylist() if acc_path.is_file() else []
        results.append((meta, rows))
    return results


def probe_figure(results: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Figure:
    """Fig. 12: test accuracy against layer, one line per intervention, one panel per model."""
    from recovery.report import figures as rfig  # lazy: loads matplotlib

    with rfig.figure_style():  # the report's fonts and sizes
        png = rfig.to_png(draw_probe_figure(results))
    return Figure(
        "probes_accuracy_by_layer",
        png,
        "Linear-probe test accuracy by layer: intervened vs clean prefixes (paper Fig. 12); "
        "line colour = the intervention's category.",
    )


def draw_probe_figure(results: Sequence[tuple[str, Sequence[dict[str, Any]]]]):
    """The matplotlib figure behind `probe_figure`.

    Lines take the report's category colours (interventions of one category differ by marker and dash). The
    legend sits below the panels in constrained layout with as many columns as fit the figure: a fixed four
    columns under one narrow panel ran past both edges of the PNG and lost the outer names.
    """
    from matplotlib.ticker import MaxNLocator

    from recovery.report import figures as rfig  # lazy: loads matplotlib

    interventions = sorted({r["intervention"] for _, rows in results for r in rows})
    categories = {r["intervention"]: r.get("category") or "other" for _, rows in results for r in rows}
    styles = rfig.intervention_styles(interventions, categories.__getitem__)
    with rfig.figure_style():
        n = max(len(results), 1)
        cols = min(n, 3)
        fig = rfig.new_figure(figsize=(4.2 * cols, 3.0 * math.ceil(n / cols) + 0.4), layout="constrained")
        for k, (model, rows) in enumerate(results):
            ax = fig.add_subplot(math.ceil(n / cols), cols, k + 1)
            for name in interventions:
                pts = sorted((r["layer"], r["accuracy"]) for r in rows if r["intervention"] == name)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ms=3, lw=1.3, label=name, **styles[name])
            ax.axhline(0.5, color="#999999", lw=0.8, ls="--")
            low = min([0.4, *(r["accuracy"] - 0.05 for r in rows)])
            ax.set_ylim(*rfig.padded_ylim(max(low, 0.0), 1.0))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("layer (input residual stream)")
            ax.set_ylabel("probe test accuracy")
            ax.set_title(model)
            ax.grid(alpha=0.3)
        handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
        if handles:
            rfig.fit_legend(fig, handles, labels)
    return fig


def probes_section(run_dir: str | Path) -> Section:
    """The "Activation probes" section from every model probed in ``run_dir`` so far."""
    results = _stored_results(run_dir)
    if not results:
        return Section(SECTION_TITLE, "_No probe results stored._")
    summary_rows = []
    detail_tables = []
    notes = []
    for meta, rows in results:
        model = meta["model"]
        layers = sorted({r["layer"] for r in rows})
        for name in sorted({r["intervention"] for r in rows}):
            mine = sorted((r for r in rows if r["intervention"] == name), key=lambda r: r["layer"])
            best = max(mine, key=lambda r: (r["accuracy"], -r["layer"]))
            summary_rows.append(
                (
                    model,
                    name,
                    mine[0]["category"],
                    mine[0]["accuracy"],
                    mine[min(1, len(mine) - 1)]["accuracy"],
                    best["accuracy"],
                    best["layer"],
                    mine[-1]["accuracy"],
                    f"{mine[0]['n_train']}/{mine[0]['n_test']}",
                    mine[0]["chance"],
                )
            )
        names = sorted({r["intervention"] for r in rows})
        by = {(r["intervention"], r["layer"]): r["accuracy"] for r in rows}
        detail_tables.append(
            Table(
                f"Probe accuracy by layer — {model}",
                ["layer", *names],
                [(layer, *(by.get((n, layer), math.nan) for n in names)) for layer in layers],
                align=["r"] * (1 + len(names)),
                collapsed=True,
            )
        )
        ex = ", ".join(f"{g}: {c}" for g, c in meta["examples"].items())
        notes.append(
            f"- **{model}**: {meta['n_layers']} layers × width {meta['hidden_size']}; prefixes per group: {ex}; "
            f"prompts truncated from the left to {meta['max_prompt_tokens']} tokens: {meta['truncated_prompts']}"
            + (f"; skipped: {', '.join(f'{k} ({v})' for k, v in meta['skips'].items())}" if meta["skips"] else "")
        )
    cfg = results[0][0]["config"]
    markdown = (
        "Can a linear classifier on the model's own hidden state tell an intervened reasoning prefix from an "
        "untouched one (paper App. C, Fig. 12)? Each prefix ends at a step boundary followed by a blank line and "
        "is pre-filled after the model's chat prompt; the **pre-attention residual stream of the final token** is "
        "recorded at every decoder layer (layer 0 = token embeddings; as every prompt usually ends in the same "
        "blank-line token, layer 0 sits at chance by construction). Per (layer, intervention), a standardised "
        f"logistic-regression probe is trained on a seeded, stratified {1 - cfg['test_fraction']:.0%}/"
        f"{cfg['test_fraction']:.0%} split of equally many clean and intervened prefixes (paper: 600 + 600, "
        f"960/240; here asked {cfg['n_clean']} clean, {cfg['n_per_intervention']} per intervention, seed "
        f"{cfg['seed']}). Clean prefixes are cut at a random step of the model's kept traces, one trace at a "
        "time. Accuracy 0.5 is chance.\n\n" + "\n".join(notes)
    )
    summary = Table(
        "Probe accuracy (test split)",
        [
            "model",
            "intervention",
            "category",
            "layer 0",
            "layer 1",
            "best",
            "best layer",
            "last layer",
            "train/test",
            "chance",
        ],
        summary_rows,
        align=["l", "l", "l", "r", "r", "r", "r", "r", "r", "r"],
        caption="layer 0 reads the token embeddings; layer 1 the residual after the first attention + MLP block.",
    )
    figure = probe_figure([(meta["model"], rows) for meta, rows in results])
    return Section(SECTION_TITLE, markdown, (figure,), (summary, *detail_tables))
