"""UMAP projection, HDBSCAN clustering, and the clusters ordered by size with their example sentences."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recovery.analysis.doubt_clusters.sentences import DoubtSentence


@dataclass(frozen=True)
class Cluster:
    """One cluster: ``rank`` 1 is the largest; ``members`` index the clustered sentences."""

    rank: int
    size: int
    members: tuple[int, ...]
    examples: tuple[str, ...]
    interventions: tuple[tuple[str, int], ...]  # (intervention, count), most common first
    summary: str = ""


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
    reducer = umap.UMAP(
        n_components=used, n_neighbors=neighbors, min_dist=min_dist, metric="cosine", random_state=seed, n_jobs=1
    )
    with warnings.catch_warnings():
        # "n_jobs overridden by setting random_state": single-threaded is the point (reproducible output).
        warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
        projected = reducer.fit_transform(embeddings)
    return np.asarray(projected, dtype=np.float64), note


def cluster_points(
    points: np.ndarray, *, min_cluster_size: int = 5, min_samples: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
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
        clusters.append(
            Cluster(rank, len(m), tuple(m), tuple(top), tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))))
        )
    return clusters, noise
