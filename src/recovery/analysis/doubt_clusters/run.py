"""`run_doubt_clusters`: sentences → sample → embeddings → UMAP → HDBSCAN → summaries, then the raw results
and the section written to the run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recovery.analysis.doubt_clusters.clustering import Cluster, cluster_points, group_clusters, reduce_dimensions
from recovery.analysis.doubt_clusters.config import ANALYSIS_NAME, ClusterConfig, ClusterResult
from recovery.analysis.doubt_clusters.embedding import default_embedding_model, embed_sentences, load_embedder
from recovery.analysis.doubt_clusters.report import clusters_section
from recovery.analysis.doubt_clusters.sentences import DoubtSentence, load_doubt_sentences, sample_sentences
from recovery.analysis.doubt_clusters.summaries import summarize_clusters
from recovery.analysis.parquet_io import write_parquet_rows
from recovery.backends.registry import make_generator
from recovery.generation import ChatTextGenerator
from recovery.model_config import ModelConfig
from recovery.report.sections_store import analysis_dir, save_section
from recovery.store import atomic_write_text

if TYPE_CHECKING:
    from recovery.generation import TextGenerator


def _judge_generator(model: ModelConfig) -> TextGenerator:

    return ChatTextGenerator(make_generator(model))


def run_doubt_clusters(
    run_dir: str | Path,
    config: ClusterConfig | None = None,
    *,
    embedder: Any = None,
    summarizer: TextGenerator | None = None,
) -> ClusterResult:
    """Find, sample, embed, project and cluster the doubtful sentences of ``run_dir``; write the results
    and the "Doubt phrases" section. ``embedder`` reuses a loaded sentence-transformers model;
    ``summarizer`` (or ``config.judge``) writes the cluster summaries.
    """
    config = config or ClusterConfig()
    skips: Counter = Counter()
    found, source = load_doubt_sentences(run_dir, window=config.window, detector=config.detector, skips=skips)
    sample = sample_sentences(found, config.max_sentences, config.seed)
    model_name = config.embedding_model or default_embedding_model()
    out = analysis_dir(run_dir, ANALYSIS_NAME)
    result = ClusterResult([], 0, len(found), len(sample), source, model_name, 0, "", config, {}, "", out)
    if len(sample) < max(4, config.min_cluster_size):
        skips["too_few_sentences_to_cluster"] += 1
        result.skips = dict(skips)
        _store(run_dir, result, sample, np.full(len(sample), -1), np.zeros(len(sample)))
        return result
    embedder = embedder if embedder is not None else load_embedder(config.embedding_model, config.device)
    vectors = embed_sentences(
        [s.sentence for s in sample], embedder, batch_size=config.embed_batch_size, progress=config.progress
    )
    points, note = reduce_dimensions(
        vectors,
        dims=config.umap_dims,
        n_neighbors=config.umap_neighbors,
        min_dist=config.umap_min_dist,
        seed=config.seed,
    )
    labels, strengths = cluster_points(points, min_cluster_size=config.min_cluster_size, min_samples=config.min_samples)
    clusters, noise = group_clusters(labels, sample, strengths, examples=config.examples_per_cluster)
    if summarizer is None and config.judge is not None:
        summarizer = _judge_generator(config.judge)
    if summarizer is not None and clusters:
        top = clusters[: config.top_clusters]
        summaries = summarize_clusters(top, sample, summarizer, samples=config.summary_samples, seed=config.seed)
        skips["cluster_without_summary"] += len(top) - len(summaries)
        clusters = [
            Cluster(c.rank, c.size, c.members, c.examples, c.interventions, summaries.get(c.rank, "")) for c in clusters
        ]
        result.summaries_from = config.judge.name if config.judge is not None else type(summarizer).__name__
    result.clusters, result.noise, result.umap_dims, result.umap_note = clusters, noise, points.shape[1], note
    result.skips = {k: v for k, v in skips.items() if v}
    rank_of = np.full(len(sample), -1)
    for c in clusters:
        rank_of[list(c.members)] = c.rank
    _store(run_dir, result, sample, rank_of, strengths)
    return result


def _store(
    run_dir: str | Path,
    result: ClusterResult,
    sample: Sequence[DoubtSentence],
    ranks: np.ndarray,
    strengths: np.ndarray,
) -> None:
    import pyarrow as pa

    out = result.out_dir
    assert out is not None
    schema = pa.schema(
        [
            ("continuation_id", pa.string()),
            ("sentence_index", pa.int64()),
            ("chain_id", pa.string()),
            ("model", pa.string()),
            ("intervention", pa.string()),
            ("target_t", pa.float64()),
            ("sentence", pa.string()),
            ("cluster", pa.int64()),
            ("strength", pa.float64()),
        ]
    )
    write_parquet_rows(
        out / "sentences.parquet",
        [
            {**asdict(s), "cluster": int(r), "strength": float(p)}
            for s, r, p in zip(sample, ranks, strengths, strict=True)
        ],
        schema,
    )
    write_parquet_rows(
        out / "clusters.parquet",
        [
            {
                "cluster": c.rank,
                "size": c.size,
                "examples": json.dumps(list(c.examples), ensure_ascii=False),
                "interventions": json.dumps(dict(c.interventions), ensure_ascii=False),
                "summary": c.summary,
            }
            for c in result.clusters
        ],
        pa.schema(
            [
                ("cluster", pa.int64()),
                ("size", pa.int64()),
                ("examples", pa.string()),
                ("interventions", pa.string()),
                ("summary", pa.string()),
            ]
        ),
    )
    meta = {
        "source": result.source,
        "n_found": result.n_found,
        "n_clustered": result.n_clustered,
        "n_clusters": len(result.clusters),
        "noise": result.noise,
        "embedding_model": result.embedding_model,
        "umap_dims": result.umap_dims,
        "umap_note": result.umap_note,
        "skips": dict(sorted(result.skips.items())),
        "summaries_from": result.summaries_from,
        "config": {
            k: (v if k != "judge" else (v and v["name"])) for k, v in asdict(result.config).items() if k != "progress"
        },
    }
    atomic_write_text(
        out / "clusters.json", json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    )
    save_section(run_dir, ANALYSIS_NAME, clusters_section(result))
