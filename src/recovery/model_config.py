"""One model of a run and the backend that runs it (`ModelConfig`), and what its config alone says about its
conventions (`model_key`, `model_spec`). Below the run's configuration: backends and prompt building read a
model's config without knowing the run it belongs to (`recovery.run_config` holds the run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recovery.backends.settings import legacy_keys, settings_class, settings_mapping
from recovery.configs import ConfigError, did_you_mean, fields_from_mapping, from_mapping
from recovery.generation import check_decoding
from recovery.models import gguf_model_name, resolve_spec

if TYPE_CHECKING:
    from recovery.models import ModelSpec

__all__ = ["ModelConfig", "model_key", "model_spec"]


@dataclass
class ModelConfig:
    """A model and the backend that runs it: what every backend shares, and ``settings``, the backend's own
    (`recovery.backends.settings`; in YAML they sit flat beside the shared keys)."""

    name: str
    path: str | None = None  # HF path or hub id; "tiny-reasoner" (the default) is the shipped toy model
    backend: str = "hf"  # a registered backend (`recovery.backends.registry`)
    spec: str | None = None  # model-conventions name (think tags, system prompt); guessed from path if unset
    # A GGUF checkpoint inside ``path`` (a file name there, or a file path): loaded, with its tokenizer and chat
    # template, by the HF backend (needs the ``gguf`` package); its file name also names the model's conventions.
    # With the openai backend the server loads it: the tokenizer is read from it here, and requests name the
    # model ``<path>:<file name>``, as ``transformers serve`` does (other servers: --served-model-name).
    gguf_file: str | None = None
    # Whether the model writes a think block. Unset: from its conventions (registered families, else its chat
    # template: a generation prompt that opens a think block). A chat model never gets a think opener.
    reasoning: bool | None = None
    # Decoding of this model's own original traces (its recommended setting, paper §3.2: Phi-4-reasoning-plus
    # T=0.8, top_k=50). Continuations of intervened chains use `RunConfig.continuation` for every model
    # (Table 15: "All evaluated models", T=0.6, top_p=0.95); these never apply to them.
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    # The backend's own settings: an instance of its settings class, or a mapping of them (None: defaults).
    settings: Any = None

    def __post_init__(self) -> None:
        cls = settings_class(self.backend)
        if self.settings is None or isinstance(self.settings, Mapping):
            try:
                self.settings = cls(**dict(self.settings or {}))
            except TypeError as err:
                raise ValueError(f"model {self.name!r}: {err}") from None
        elif not isinstance(self.settings, cls):
            raise ValueError(
                f"model {self.name!r}: backend {self.backend!r} takes {cls.__name__}, got {type(self.settings).__name__}"
            )
        check_decoding(self.temperature, self.top_p, self.top_k, where=f"model {self.name!r}: ")
        if self.gguf_file is not None and (self.backend not in ("hf", "openai") or not self.path):
            raise ValueError(
                f"model {self.name!r}: gguf_file needs the hf or openai backend and a path (the folder holding it)"
            )

    @classmethod
    def from_config_mapping(cls, data: Mapping[str, Any], *, where: str = "model") -> ModelConfig:
        """A model config from its YAML shape: the shared keys, and the backend's settings flat beside them.

        A key that is neither shared nor a setting of the named backend is refused with its path. Keys of other
        built-in backends at their old defaults are read as absent: manifests list them all (`to_config_mapping`).
        """
        shared = {f.name for f in dataclasses.fields(cls)} - {"settings"}
        backend = data.get("backend", "hf")
        try:
            settings_cls = settings_class(backend) if isinstance(backend, str) else None
        except ValueError as err:
            raise ConfigError(f"{where}.backend: {err}") from None
        own = {f.name for f in dataclasses.fields(settings_cls)} if settings_cls else set()
        legacy = legacy_keys()
        flat = {k: v for k, v in data.items() if k not in shared and k != "settings"}
        for key, value in flat.items():
            if key not in own and not (key in legacy and value == legacy[key]):
                hint = did_you_mean(key, shared | own, label="known keys")
                raise ConfigError(f"{where}: unknown key {key!r} for backend {backend!r}{hint}")
        settings = dict(data.get("settings") or {})
        settings.update({k: v for k, v in flat.items() if k in own})
        common = {k: v for k, v in data.items() if k in shared}
        if settings_cls is not None:
            common["settings"] = from_mapping(settings_cls, settings, where=where)
        return fields_from_mapping(cls, common, where=where)

    def to_config_mapping(self) -> dict[str, Any]:
        """The YAML shape: shared keys, then every built-in backend's settings keys (their defaults where this
        backend has no such setting: the manifest's shape since before backends owned their settings, so run
        directories keep their bytes), then this backend's settings."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "settings"}
        return {**shared, **legacy_keys(), **settings_mapping(self.settings)}


def model_key(config: ModelConfig) -> str:
    """What names ``config``'s model for its conventions: a GGUF's model name (from its file name), else the
    path or the config's name."""
    if config.gguf_file:
        return gguf_model_name(config.gguf_file)
    return config.path or config.name


def model_spec(config: ModelConfig) -> ModelSpec:
    """The conventions of ``config``'s model without loading its tokenizer: its ``spec``, else what its path or
    name (and ``reasoning``) say. A model whose think tags only its chat template reveals should name its
    ``spec``, so that readers of the run (the aggregate's length overhead) see the same tags as the backend."""

    return resolve_spec(config.spec, model_key(config), reasoning=config.reasoning)
