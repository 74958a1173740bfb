"""The evaluation's configuration (dataclasses, loaded from YAML) and the decoding it asks for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from recovery.analysis.bbm.data import BBM_TASKS
from recovery.configs import from_mapping, load_yaml
from recovery.data.sources import HubCopy, HubLoader
from recovery.generation import SamplingParams
from recovery.model_config import ModelConfig
from recovery.models import get_spec, spec_for


@dataclass
class BBMDataConfig:
    """Where the items come from: local files (``path``) or a Hub copy (``hub_id``, ``split``, ``revision``;
    `hub_copy`), which tasks, how many. `recovery.analysis.bbm.data.load_bbm` reads the items."""

    path: str | None = None
    hub_id: str | None = None
    split: str = "train"
    task_column: str | None = None
    revision: str | None = None
    tasks: list[str] = field(default_factory=lambda: list(BBM_TASKS))
    limit: int | None = None  # items per task (the first ones of each file)

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hub_id is None):
            raise ValueError("data: set exactly one of path (local <task>.jsonl files) and hub_id")
        if self.limit is not None and self.limit < 1:
            raise ValueError("data.limit must be ≥ 1")
        if not self.tasks:
            raise ValueError("data.tasks must not be empty")

    def hub_copy(self, loader: HubLoader | None = None) -> HubCopy | None:
        """The Hub copy the fields name, read with ``loader`` (None: ``datasets.load_dataset``); None for local
        files."""
        return None if self.hub_id is None else HubCopy(self.hub_id, self.split, self.revision, loader)


@dataclass
class BBMSamplingConfig:
    """Decoding of the answers: ``greedy``; ``recommended`` (the model's card, `recovery.models`, with the
    `ModelConfig`'s own temperature/top_p/top_k winning); or ``custom`` (the values below)."""

    mode: Literal["greedy", "recommended", "custom"] = "recommended"
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int | None = None
    max_new_tokens: int = 32768
    seed: int = 0


@dataclass
class BBMConfig:
    """A BIG-Bench Mistake evaluation: items, models, decoding and where results go."""

    out: str
    data: BBMDataConfig
    models: list[ModelConfig] = field(default_factory=lambda: [ModelConfig(name="tiny-reasoner")])
    sampling: BBMSamplingConfig = field(default_factory=BBMSamplingConfig)
    flush_every: int = 64  # answers per committed shard (a kill loses at most this many)
    title: str = "BIG-Bench Mistake"

    def __post_init__(self) -> None:
        names = [m.name for m in self.models]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"models must be a non-empty list of unique names, got {names}")
        if self.flush_every < 1:
            raise ValueError("flush_every must be ≥ 1")


def load_bbm_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> BBMConfig:
    """Load a BBM config from YAML; ``overrides`` replace top-level keys (``out``) or, for ``data``, its
    keys (``{"data": {"limit": 3}}``)."""
    data = load_yaml(path)
    for key, value in (overrides or {}).items():
        if key == "data" and isinstance(value, Mapping):
            data["data"] = {**(data.get("data") or {}), **value}
        else:
            data[key] = value
    return from_mapping(BBMConfig, data, where=str(path))


def sampling_for(model: ModelConfig, cfg: BBMSamplingConfig, *, seed: int | None = None) -> SamplingParams:
    """One answer's decoding for ``model`` under ``cfg`` (n = 1)."""
    if cfg.mode == "greedy":
        return SamplingParams(n=1, temperature=0.0, top_p=1.0, top_k=None, seed=seed, max_new_tokens=cfg.max_new_tokens)
    if cfg.mode == "custom":
        t, p, k = cfg.temperature, cfg.top_p, cfg.top_k
    else:
        spec = get_spec(model.spec) if model.spec else spec_for(model.path or model.name)
        t, p, k = spec.trace_decoding.temperature, spec.trace_decoding.top_p, spec.trace_decoding.top_k
    t = model.temperature if model.temperature is not None else t
    p = model.top_p if model.top_p is not None else p
    k = model.top_k if model.top_k is not None else k
    return SamplingParams(n=1, temperature=t, top_p=p, top_k=k, seed=seed, max_new_tokens=cfg.max_new_tokens)
