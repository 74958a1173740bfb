"""A run resumed with other weights at the same model path is refused before any work: a checkpoint
retrained in place, or a package upgrade shipping a new tiny reasoner, must not add its records to the old
model's under one name."""

from __future__ import annotations

import json
import shutil

import pytest

from recovery.configs import ConfigError
from recovery.model_config import ModelConfig
from recovery.pipeline import DatasetConfig, RunConfig, SamplingConfig, TracesConfig, run_pipeline
from recovery.run_dir.weights import WEIGHTS_FILE, weights_fingerprint
from recovery.store import Table


def _config(run_dir, model: ModelConfig) -> RunConfig:
    return RunConfig(
        run_dir=str(run_dir),
        models=[model],
        dataset=DatasetConfig(name="toy", limit=2, options={"seed": 5}),
        traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=120)),
    )


def test_a_checkpoint_retrained_in_place_is_not_resumed(tmp_path, tiny_reasoner):
    import torch

    from recovery.toy import checkpoint_dir

    folder = tmp_path / "checkpoint"
    shutil.copytree(checkpoint_dir(), folder)
    config = _config(tmp_path / "run", ModelConfig(name="mine", path=str(folder), spec="tiny-reasoner"))
    run_pipeline(config, stages=["problems", "traces"], progress=False)
    traces = Table(tmp_path / "run" / "traces")
    written = sorted(r["id"] for r in traces.iter_rows(["id"]))
    assert json.loads((tmp_path / "run" / WEIGHTS_FILE).read_text()) == {"mine": weights_fingerprint(folder)}

    run_pipeline(config, stages=["problems", "traces"], progress=False)  # same weights: resumes
    assert sorted(r["id"] for r in traces.iter_rows(["id"])) == written

    model, _ = tiny_reasoner
    retrained = type(model)(model.config)
    retrained.load_state_dict(model.state_dict())
    with torch.no_grad():
        retrained.model.norm.weight.mul_(1.01)  # one tensor: a file this size is read whole
    retrained.save_pretrained(folder)
    with pytest.raises(ConfigError, match=r"weights of model 'mine' at .*checkpoint are not the ones this run"):
        run_pipeline(config, stages=["problems", "traces", "filter"], progress=False)
    assert sorted(r["id"] for r in traces.iter_rows(["id"])) == written
    assert not Table(tmp_path / "run" / "kept").exists()  # refused before any work


def test_the_shipped_tiny_reasoner_is_fingerprinted(tmp_path, tiny_reasoner):
    """The default model's weights live in the installed package, so an upgrade that ships a new
    checkpoint is caught like any other change."""
    from recovery.toy import checkpoint_dir

    run_pipeline(_config(tmp_path / "run", ModelConfig(name="tiny-reasoner")), stages=["problems"], progress=False)
    stored = json.loads((tmp_path / "run" / WEIGHTS_FILE).read_text())
    assert stored == {"tiny-reasoner": weights_fingerprint(checkpoint_dir())} and len(stored["tiny-reasoner"]) == 64


def test_fingerprint_reads_every_weight_file_and_ignores_the_rest(tmp_path):
    (tmp_path / "model-00001.safetensors").write_bytes(b"a" * 10)
    big = tmp_path / "model-00002.safetensors"
    big.write_bytes(bytes(80 << 20))  # over the whole-file limit: edges and sampled blocks
    first = weights_fingerprint(tmp_path)
    # What a training run adds beside its model as it goes on does not change the model.
    (tmp_path / "README.md").write_text("notes")
    (tmp_path / "training_args.bin").write_bytes(b"args")
    (tmp_path / "checkpoint-500").mkdir()
    (tmp_path / "checkpoint-500" / "model.safetensors").write_bytes(b"step 500")
    (tmp_path / "checkpoint-500" / "optimizer.pt").write_bytes(b"state")
    assert weights_fingerprint(tmp_path) == first
    (tmp_path / "pytorch_model.bin").write_bytes(b"legacy weights")
    assert weights_fingerprint(tmp_path) != first
    (tmp_path / "pytorch_model.bin").unlink()
    with big.open("r+b") as handle:  # the last byte
        handle.seek((80 << 20) - 1)
        handle.write(b"c")
    assert weights_fingerprint(tmp_path) != first
    assert weights_fingerprint(tmp_path / "model-00001.safetensors") is not None
    assert weights_fingerprint(tmp_path / "empty-folder-that-does-not-exist") is None


def test_a_hub_model_is_fingerprinted_by_the_cached_snapshot_main_points_to(tmp_path, monkeypatch):
    """A Hub id resolves to its snapshot in the Hugging Face cache; a new revision downloaded there (refs/main
    moves to another snapshot with other weights) changes the fingerprint, so a resume is refused."""
    from huggingface_hub import constants

    from recovery.backends.registry import local_weights

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--org--reasoner"
    for commit, weights in (("a" * 40, b"old"), ("b" * 40, b"new")):
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text("{}")
        (snapshot / "model.safetensors").write_bytes(weights)
    (repo / "refs").mkdir()
    model = ModelConfig(name="org/reasoner")
    assert local_weights(model) is None and local_weights(ModelConfig(name="not a repo id!")) is None
    (repo / "refs" / "main").write_text("a" * 40)
    assert local_weights(model) == repo / "snapshots" / ("a" * 40)
    old = weights_fingerprint(local_weights(model))
    (repo / "refs" / "main").write_text("b" * 40)
    assert weights_fingerprint(local_weights(model)) != old
