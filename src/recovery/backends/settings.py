"""Each backend's own settings: one dataclass per backend, registered by backend name.

A model config (`recovery.model_config.ModelConfig`) holds what every backend shares (name, path, conventions,
decoding of its own traces) and, in ``settings``, an instance of its backend's class here. In YAML the
settings sit flat beside the shared keys (``backend: vllm`` then ``tensor_parallel_size: 2``); a key the named
backend does not have is refused with its path.

Every setting declares whether it can change a run's results (`setting(..., results=...)`): a resume with
a changed setting that changes results is refused, one that does not (throughput, where a server is) is
allowed — the declaration is the rule (`result_settings`), not a list kept elsewhere.

This module is light (no torch, no backend code): the run config imports it to validate settings when a
config is loaded. The backends themselves register with `recovery.backends.registry`, which also registers
their settings here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

from recovery.configs import CHANGES_RESULTS as RESULTS
from recovery.configs import did_you_mean
from recovery.registry import Registry


def setting(default: Any = dataclasses.MISSING, *, results: bool) -> Any:
    """A settings field with its default and whether a change of it can change results."""
    return field(default=default, metadata={RESULTS: results})


@dataclass
class HFSettings:
    """transformers in this process (CPU or GPU; `recovery.backends.hf`)."""

    dtype: str = setting("auto", results=True)
    device: str | None = setting(None, results=True)
    batch_size: int = setting(8, results=False)  # requests per batch (×8 sample rows); throughput only
    # Replicas in worker processes: the way to use several CPU cores with a small model.
    data_parallel_size: int = setting(1, results=True)

    def __post_init__(self) -> None:
        _at_least_one(self, "batch_size", "data_parallel_size")


@dataclass
class VLLMSettings:
    """vLLM's offline engine (`recovery.backends.vllm`)."""

    dtype: str = setting("auto", results=True)
    tensor_parallel_size: int = setting(1, results=True)
    data_parallel_size: int = setting(1, results=True)
    gpu_memory_utilization: float = setting(0.9, results=True)
    max_model_len: int | None = setting(None, results=True)

    def __post_init__(self) -> None:
        _at_least_one(self, "tensor_parallel_size", "data_parallel_size")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must lie in (0, 1]")


@dataclass
class OpenAISettings:
    """An OpenAI-compatible server (`recovery.backends.openai_compat`): vLLM, SGLang, `transformers serve`...

    What the server accepts is probed before a run (`recovery.backends.openai_probe`; "auto"): prompts as
    "tokens" or "text", "n" samples per request or "1"; both change results and are recorded in servers.json.
    ``require_seed: false`` runs on a server that refuses request seeds (not reproducible).
    ``probe_timeout_s`` bounds each question of that probe (a server that never answers fails within it);
    ``request_timeout_s`` bounds each attempt of a generation request after it.
    """

    base_url: str = setting(results=False)
    api_key: str | None = setting(None, results=False)
    max_concurrency: int = setting(16, results=False)
    request_timeout_s: float = setting(600.0, results=False)
    probe_timeout_s: float = setting(15.0, results=False)
    prompt_format: str = setting("auto", results=True)
    samples_per_request: str | int = setting("auto", results=True)
    require_seed: bool = setting(True, results=True)

    def __post_init__(self) -> None:
        self.samples_per_request = str(self.samples_per_request)  # YAML reads `samples_per_request: 1` as an int
        _at_least_one(self, "max_concurrency")
        for key in ("request_timeout_s", "probe_timeout_s"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        for key, allowed in (
            ("prompt_format", ("auto", "tokens", "text")),
            ("samples_per_request", ("auto", "n", "1")),
        ):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} must be one of {allowed}, got {getattr(self, key)!r}")


def _at_least_one(settings: Any, *keys: str) -> None:
    for key in keys:
        if getattr(settings, key) < 1:
            raise ValueError(f"{key} must be ≥ 1, got {getattr(settings, key)}")


# Each backend's settings class, by backend name: filled by `recovery.backends.registry.register`, and read
# when a model config is loaded (so reading it loads the plug-ins, whose backends register here too).
SETTINGS: Registry[type] = Registry("backend", {"hf": HFSettings, "vllm": VLLMSettings, "openai": OpenAISettings})


def register_settings(backend: str, settings_class: type) -> None:
    """Make ``backend``'s settings known to model configs (called by `recovery.backends.registry.register`)."""
    if not dataclasses.is_dataclass(settings_class):
        raise TypeError(f"settings of backend {backend!r} must be a dataclass, got {settings_class!r}")
    for f in dataclasses.fields(settings_class):
        if RESULTS not in f.metadata:
            raise TypeError(f"{settings_class.__name__}.{f.name}: declare it with setting(..., results=True|False)")
    SETTINGS[backend] = settings_class


def settings_class(backend: str) -> type:
    """The settings class of ``backend``; `ValueError` naming the known backends for an unknown one."""
    try:
        return SETTINGS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}{did_you_mean(backend, SETTINGS, label='known')}") from None


def result_settings(settings: Any) -> dict[str, Any]:
    """The settings of ``settings`` that can change results, by name."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.metadata.get(RESULTS)}


def settings_mapping(settings: Any) -> dict[str, Any]:
    """All settings by name (as they are written flat into a model's config mapping)."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}


@cache
def legacy_keys() -> Mapping[str, Any]:
    """Every built-in backend's settings with their defaults: the flat union every model config held before
    backends owned their settings. Manifests still list it, so run directories stay byte for byte what they
    were, and a stored model's keys of other backends at these defaults are read back as absent."""
    union: dict[str, Any] = {}
    for cls in (HFSettings, VLLMSettings, OpenAISettings):
        for f in dataclasses.fields(cls):
            union.setdefault(f.name, None if f.default is dataclasses.MISSING else f.default)
    union["batch_size"] = 8  # every backend's key before settings moved (hf's default)
    return MappingProxyType(union)


def own_settings(model: Any, *, results_only: bool = False) -> Any:
    """A model's flat config mapping (as `ModelConfig.to_config_mapping` writes it, or a manifest holds it) with,
    among the settings keys, only its own backend's — only those that change results with ``results_only`` —
    and every shared key. Anything else (not a mapping, an unknown backend) is returned as it is."""
    if not isinstance(model, Mapping) or model.get("backend", "hf") not in SETTINGS:
        return model
    fields = dataclasses.fields(SETTINGS[model.get("backend", "hf")])
    keep = {f.name for f in fields if f.metadata.get(RESULTS) or not results_only}
    legacy = legacy_keys()
    return {k: v for k, v in model.items() if k in keep or k not in legacy}
