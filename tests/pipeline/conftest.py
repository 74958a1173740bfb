"""Pipeline tests run the real HF backend on the tiny reasoner shipped with the package."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_reasoner():
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
