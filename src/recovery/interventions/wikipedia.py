"""The pool of Wikipedia paragraphs that the *Wikipedia text* intervention draws from (paper §3.1).

The paper replaces R_k with "a randomly chosen paragraph from a subset of English Wikipedia"; the
reference implementation keeps paragraphs of at least 100 characters. A pool is loaded explicitly from a
JSONL file, a blank-line-separated text file or a `datasets` source; nothing is read at import time.
Texts are split on blank lines and each paragraph is stripped, so every paragraph is one reasoning step.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from recovery.interventions.cleaning import split_paragraphs

DEFAULT_MIN_CHARS = 100


class WikipediaPool:
    """An ordered, immutable collection of paragraphs with at least ``min_chars`` characters."""

    def __init__(self, paragraphs: Iterable[str], *, min_chars: int = DEFAULT_MIN_CHARS, source: str = "") -> None:
        if min_chars < 0:
            raise ValueError(f"min_chars must be ≥ 0, got {min_chars}")
        kept: list[str] = []
        for text in paragraphs:
            if not isinstance(text, str):
                raise TypeError(f"{source or 'pool'}: paragraphs must be str, got {type(text).__name__}")
            # A text may hold several paragraphs (a whole article); each one becomes a candidate.
            kept.extend(p for p in split_paragraphs(text) if len(p) >= min_chars)
        if not kept:
            raise ValueError(f"{source or 'pool'}: no paragraph has ≥ {min_chars} characters")
        self.paragraphs: tuple[str, ...] = tuple(kept)
        self.min_chars = min_chars
        self.source = source

    def __len__(self) -> int:
        return len(self.paragraphs)

    def __repr__(self) -> str:
        return f"WikipediaPool({len(self)} paragraphs, min_chars={self.min_chars}, source={self.source!r})"

    @cached_property
    def fingerprint(self) -> str:
        """A 16-hex-character hash of the paragraphs in order: same pool → same fingerprint (recorded in ids)."""
        digest = hashlib.sha256()
        for paragraph in self.paragraphs:
            digest.update(paragraph.encode("utf-8", errors="surrogatepass"))
            digest.update(b"\x00")
        return digest.hexdigest()[:16]

    def choice(self, rng: random.Random) -> str:
        """One paragraph, drawn uniformly with the item's private generator."""
        return self.paragraphs[rng.randrange(len(self.paragraphs))]

    @classmethod
    def from_jsonl(
        cls, path: str | os.PathLike[str], *, text_field: str = "text", min_chars: int = DEFAULT_MIN_CHARS
    ) -> WikipediaPool:
        """Load one paragraph per JSON line from ``text_field`` (e.g. ``wikitext2_test_paragraphs.jsonl``)."""
        path = Path(path)
        texts: list[str] = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if text_field not in record:
                    raise KeyError(f"{path}:{number}: no field {text_field!r} (fields: {', '.join(record)})")
                texts.append(record[text_field])
        return cls(texts, min_chars=min_chars, source=str(path))

    @classmethod
    def from_text(cls, path: str | os.PathLike[str], *, min_chars: int = DEFAULT_MIN_CHARS) -> WikipediaPool:
        """Load a UTF-8 text file whose paragraphs are separated by blank lines."""
        path = Path(path)
        return cls([path.read_text(encoding="utf-8")], min_chars=min_chars, source=str(path))

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, min_chars: int = DEFAULT_MIN_CHARS) -> WikipediaPool:
        """`from_jsonl` for ``*.jsonl`` files, `from_text` otherwise."""
        if str(path).endswith(".jsonl"):
            return cls.from_jsonl(path, min_chars=min_chars)
        return cls.from_text(path, min_chars=min_chars)

    @classmethod
    def from_datasets(
        cls,
        name_or_dataset: Any,
        split: str = "train",
        text_field: str = "text",
        *,
        config: str | None = None,
        min_chars: int = DEFAULT_MIN_CHARS,
        max_paragraphs: int | None = None,
        **load_kwargs: Any,
    ) -> WikipediaPool:
        """Load from a Hugging Face `datasets` source: a `Dataset`, a `DatasetDict` (``split`` is taken) or
        a Hub name passed to `datasets.load_dataset` (e.g. ``"wikimedia/wikipedia", config="20231101.en"``).
        ``max_paragraphs`` stops early on large corpora (the first paragraphs in dataset order are kept).
        """
        dataset = name_or_dataset
        if isinstance(name_or_dataset, str):
            import datasets  # lazy: an optional extra, and slow to import

            dataset = datasets.load_dataset(name_or_dataset, config, split=split, **load_kwargs)
        elif hasattr(dataset, "keys") and split in dataset.keys():  # DatasetDict
            dataset = dataset[split]
        column_names = getattr(dataset, "column_names", None)
        if column_names is not None and text_field not in column_names:
            raise KeyError(f"dataset has no column {text_field!r} (columns: {', '.join(column_names)})")
        source = name_or_dataset if isinstance(name_or_dataset, str) else type(name_or_dataset).__name__
        kept: list[str] = []
        for row in dataset:
            kept.extend(p for p in split_paragraphs(row[text_field]) if len(p) >= min_chars)
            if max_paragraphs is not None and len(kept) >= max_paragraphs:
                kept = kept[:max_paragraphs]
                break
        return cls(kept, min_chars=min_chars, source=f"datasets:{source}/{split}")
