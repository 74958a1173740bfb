"""The Wikipedia paragraph pool: loading from JSONL, text and `datasets`, filtering, draws."""

from __future__ import annotations

import json
import random

import pytest

from recovery.interventions import WikipediaPool

LONG_A = "A" * 99 + "."  # exactly 100 characters: kept
LONG_B = "The Mayan calendar is a system of calendars used in pre-Columbian Mesoamerica and in many modern communities."
SHORT = "Too short."


def test_min_chars_filter_and_paragraph_split() -> None:
    pool = WikipediaPool([LONG_A, SHORT, f"{LONG_B}\n\n{SHORT}\n \n  {LONG_A}  "])
    assert pool.paragraphs == (LONG_A, LONG_B, LONG_A)
    assert all(len(p) >= 100 for p in pool.paragraphs)
    assert WikipediaPool([SHORT], min_chars=5).paragraphs == (SHORT,)
    with pytest.raises(ValueError, match="no paragraph"):
        WikipediaPool([SHORT])


def test_choice_uses_the_given_rng() -> None:
    pool = WikipediaPool([LONG_A, LONG_B])
    draws = [pool.choice(random.Random(s)) for s in range(20)]
    assert draws == [pool.choice(random.Random(s)) for s in range(20)]
    assert set(draws) == {LONG_A, LONG_B}


def test_fingerprint_depends_on_content_and_order() -> None:
    assert WikipediaPool([LONG_A, LONG_B]).fingerprint == WikipediaPool([LONG_A, LONG_B]).fingerprint
    assert WikipediaPool([LONG_A, LONG_B]).fingerprint != WikipediaPool([LONG_B, LONG_A]).fingerprint


def test_from_jsonl_and_from_text(tmp_path) -> None:  # noqa: ANN001
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": t}) for t in [LONG_A, SHORT, LONG_B]) + "\n\n", encoding="utf-8")
    assert WikipediaPool.from_jsonl(jsonl, text_field="body").paragraphs == (LONG_A, LONG_B)
    with pytest.raises(KeyError, match="text"):
        WikipediaPool.from_jsonl(jsonl)
    text = tmp_path / "p.txt"
    text.write_text(f"{LONG_A}\n\n{SHORT}\n\n\n{LONG_B}\n", encoding="utf-8")
    assert WikipediaPool.from_text(text).paragraphs == (LONG_A, LONG_B)
    assert WikipediaPool.from_path(text).paragraphs == WikipediaPool.from_path(str(text)).paragraphs


def test_from_datasets_in_memory() -> None:
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": [LONG_A, SHORT, f"{LONG_B}\n\n{LONG_A}"], "id": [1, 2, 3]})
    assert WikipediaPool.from_datasets(dataset).paragraphs == (LONG_A, LONG_B, LONG_A)
    assert WikipediaPool.from_datasets(dataset, max_paragraphs=2).paragraphs == (LONG_A, LONG_B)
    assert WikipediaPool.from_datasets(datasets.DatasetDict({"test": dataset}), split="test").paragraphs[0] == LONG_A
    with pytest.raises(KeyError, match="column"):
        WikipediaPool.from_datasets(dataset, text_field="content")


def test_shared_wikitext_paragraphs(shared_data) -> None:  # noqa: ANN001
    path = shared_data / "wikipedia_paragraphs" / "wikitext2_test_paragraphs.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    pool = WikipediaPool.from_jsonl(path)
    assert len(pool) == 1829
    assert min(len(p) for p in pool.paragraphs) >= 100
    assert all("\n\n" not in p for p in pool.paragraphs)
    assert pool.paragraphs[0].startswith("Robert Boulter is an English film")
