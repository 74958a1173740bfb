"""A server model's prompts are built here with its tokenizer (issue 37: fail fast and by name): a tokenizer
that cannot be found is one line before any work, and the tiny reasoner behind a server reads the shipped
checkpoint's tokenizer instead of asking the Hub for a repo called 'tiny-reasoner'."""

from __future__ import annotations

import pytest

from recovery.backends.registry import check_loadable, make_generator
from recovery.configs import ConfigError, from_mapping
from recovery.model_config import ModelConfig
from recovery.models import tiny_reasoner_dir


def _openai(**fields) -> ModelConfig:
    return from_mapping(ModelConfig, {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", **fields}, where="m")


def test_a_server_models_tokenizer_that_cannot_be_found_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"models\[0\] 'remote'.*tokenizer_config\.json.*builds prompts"):
        check_loadable(_openai(name="remote", path="org/no-such-model"), where="models[0]")
    with pytest.raises(ConfigError, match="holds no tokenizer_config.json"):
        check_loadable(_openai(name="remote", path="/nonexistent/folder"), where="models[0]")


def test_the_tiny_reasoner_behind_a_server_uses_the_shipped_tokenizer(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = _openai(name="tiny-reasoner")
    check_loadable(config)  # nothing to fetch
    generator = make_generator(config, seed=0)
    try:
        assert generator.tokenizer.name_or_path == str(tiny_reasoner_dir())
        assert generator.spec.name == "tiny-reasoner"
    finally:
        generator.close()
