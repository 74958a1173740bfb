"""Shared test setup: no network, offline W&B, and the location of the read-only shared data."""

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
