"""Shared test setup: no network, offline W&B, the location of the read-only shared data, and the tiny
reasoner with an HF backend factory (loaded once per session: loading is the slow part)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Hub calls take 20–45 s to fail without network; never let a test try.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Sleeping, not spinning, OpenMP threads: on a busy 2-core machine spinning made generation ~100x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SHARED_DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def toy_run_for(tmp_path_factory):
    """``toy_run_for(spec)``: the toy run directory of a `toy_runs.ToyRunSpec`, built once per session."""
    from toy_runs import ToyRunCache

    return ToyRunCache(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_reasoner():
    """The tiny reasoner shipped with the package (model, tokenizer), loaded once per session."""
    pytest.importorskip("torch")
    from recovery.toy import has_checkpoint, load_tiny_reasoner

    if not has_checkpoint():
        pytest.skip("tiny reasoner checkpoint not shipped")
    return load_tiny_reasoner()


@pytest.fixture(scope="session")
def hf_factory(tiny_reasoner):
    """A backend factory sharing one loaded model across runs (loading is the slow part)."""
    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec

    model, tokenizer = tiny_reasoner

    def factory(model_config, *, max_batch_requests=None):
        return HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0,
                           max_batch_requests=max_batch_requests)  # fmt: skip

    return factory
