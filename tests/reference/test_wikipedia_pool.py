"""The authors' Wikipedia pool from a `datasets` source (``interventions.wikipedia_pool: datasets:<name>:<config>``):
streamed, the first articles taken, split and shuffled their way — the same pool as from a file of the same
texts. A local dataset folder stands in for wikimedia/wikipedia (no Hub in tests); the code path is the one
that streams the Hub."""

from __future__ import annotations

import json

import pytest

from recovery.configs import ConfigError
from recovery.interventions.reference_text import ReferencePool, authors_pool
from recovery.pipeline import load_run_config
from reference.intervention_rows import wikipedia_texts


def test_a_datasets_source_gives_the_pool_a_file_of_the_same_texts_gives(tmp_path):
    pytest.importorskip("datasets")
    folder = tmp_path / "wiki"
    folder.mkdir()
    texts = wikipedia_texts()[:40]
    lines = "".join(json.dumps({"text": text}) + "\n" for text in texts)
    (folder / "train.jsonl").write_text(lines, encoding="utf-8")
    streamed = authors_pool(f"datasets:{folder}")
    from_file = ReferencePool.from_path(folder / "train.jsonl", seed=42, min_chars=100)
    assert streamed.paragraphs == from_file.paragraphs and len(streamed) == len(texts)


def _config(tmp_path, protocol: str):
    path = tmp_path / f"{protocol}.yaml"
    path.write_text(
        "run_dir: " + str(tmp_path / "run") + "\n"
        "dataset: {name: toy, limit: 2}\n"
        f"protocol: {protocol}\n"
        "interventions: {names: [wikipedia_text], wikipedia_pool: 'datasets:wikimedia/wikipedia:20231101.en'}\n",
        encoding="utf-8",
    )
    return path


def test_only_the_reference_protocol_reads_the_pool_from_a_datasets_source(tmp_path):
    assert load_run_config(_config(tmp_path, "reference")).interventions.wikipedia_pool.startswith("datasets:")
    with pytest.raises(ConfigError, match="datasets: source is the authors' pool"):
        load_run_config(_config(tmp_path, "default"))
