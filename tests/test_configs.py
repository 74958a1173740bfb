from dataclasses import dataclass, field
from typing import Literal

import pytest

from recovery.configs import ConfigError, from_mapping, load_yaml


@dataclass
class Inner:
    n: int = 8
    temperature: float = 0.6


@dataclass
class Outer:
    name: str
    backend: Literal["hf", "vllm", "openai"] = "hf"
    timesteps: list[float] = field(default_factory=lambda: [0.1, 0.5])
    inner: Inner = field(default_factory=Inner)
    options: dict[str, dict] = field(default_factory=dict)
    limit: int | None = None

    def __post_init__(self):
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be ≥ 1")


def test_nested_conversion_and_defaults():
    cfg = from_mapping(Outer, {"name": "x", "inner": {"n": 4, "temperature": 1}, "timesteps": [0.3]})
    assert cfg.inner == Inner(4, 1.0) and isinstance(cfg.inner.temperature, float)
    assert cfg.timesteps == [0.3] and cfg.limit is None


@pytest.mark.parametrize(
    "data,message",
    [
        ({"name": "x", "inenr": {}}, "config: unknown key 'inenr'; did you mean 'inner'?"),
        ({"name": "x", "inner": {"n": "8"}}, "config.inner.n: expected an integer, got '8'"),
        ({"name": "x", "inner": {"n": True}}, "config.inner.n: expected an integer"),
        ({"name": "x", "backend": "tgi"}, "config.backend: 'tgi' is not one of 'hf', 'vllm', 'openai'"),
        ({"name": "x", "timesteps": 0.3}, "config.timesteps: expected a list"),
        ({}, "config: missing required key 'name'"),
        ({"name": "x", "limit": 0}, "config: limit must be ≥ 1"),
        ({"name": "x", "timesteps": [0.1, "a"]}, r"config.timesteps\[1\]: expected a number"),
    ],
)
def test_clear_errors(data, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping(Outer, data)


def test_load_yaml_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_yaml(listy)
