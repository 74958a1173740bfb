"""The backends a model config can name (``models[].backend``), and the factory that builds one.

A backend is registered with `register` (into `BACKENDS`, a `recovery.registry.Registry`; from a plug-in
too): its name, its settings class (`recovery.backends.settings`, fields
declared with whether they change results), the function that builds its `recovery.generation.Generator`
from a `ModelConfig`, and whether its weights are loaded on this machine. The built-ins are registered at the
end of this module; a new backend is one module (settings class + builder) plus one `register` call.
Imports of torch, transformers and vLLM happen inside the builders, so naming a backend stays light.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.backends.openai_compat import OpenAICompatGenerator
from recovery.backends.openai_probe import resolved_fields
from recovery.backends.replicas import ReplicatedGenerator
from recovery.backends.settings import HFSettings, OpenAISettings, VLLMSettings, register_settings
from recovery.backends.vllm import VLLMConfig, VLLMGenerator
from recovery.backends.vllm_engine import VLLMEngineGenerator
from recovery.configs import ConfigError
from recovery.generation import Generator
from recovery.model_config import ModelConfig, model_key
from recovery.models import (
    TINY_REASONER,
    ModelSpec,
    get_spec,
    is_tiny_reasoner,
    resolve_spec,
    spec_for,
    tiny_reasoner_dir,
)
from recovery.registry import Registry


@dataclass(frozen=True)
class Backend:
    """A backend runs can name: ``build(config, seed, server)`` makes its generator for one model config
    (``server``: the settings probed from the model's server, for a server backend); ``settings`` is the class
    of its ``ModelConfig.settings``; ``local_weights`` says whether that model is loaded here (so its weights
    must be found before a run starts) or lives on a server, and ``local_tokenizer`` whether a server model's
    tokenizer is loaded here (to build its prompts), so it must be found before a run starts too."""

    name: str
    settings: type
    build: Callable[[ModelConfig, int, Mapping[str, Any] | None], Generator]
    local_weights: bool = True
    local_tokenizer: bool = False
    # The backend around a model already loaded in this process — a trainer's policy, TRL's colocated engine:
    # ``live(model, tokenizer, spec, seed=..., **options)``; None when the backend cannot (a server). The
    # training callback evaluates checkpoints through these.
    live: Callable[..., Generator] | None = None


BACKENDS: Registry[Backend] = Registry("backend")


def register(backend: Backend) -> Backend:
    """Make ``backend`` nameable by model configs (its settings too); returns it. The same name again
    replaces the entry."""
    register_settings(backend.name, backend.settings)
    BACKENDS[backend.name] = backend
    return backend


def make_generator(
    config: ModelConfig, *, seed: int = 0, servers: Mapping[str, Mapping[str, Any]] | None = None
) -> Generator:
    """The backend named by ``config.backend`` for the model at ``config.path``.

    ``servers`` maps a model name to the settings its server was probed for before the run
    (`recovery.pipeline.servers`); an openai model not in it probes its server itself before its first
    request.

    The model is ``path``, else ``name`` (as for every backend); the toy model shipped with the package is
    chosen only by its own name, ``tiny-reasoner`` (see `recovery.models.is_tiny_reasoner`). For the HF backend,
    ``data_parallel_size > 1`` runs that many replicas in worker processes (`ReplicatedGenerator`): the
    way to use several CPU cores with a small model, which decodes on one thread.
    """
    return backend_named(config.backend).build(config, seed, (servers or {}).get(config.name))


def backend_named(name: str) -> Backend:
    """The registered backend called ``name``; `ValueError` naming the known ones for any other."""
    return BACKENDS.lookup(name)


def _declared_spec(config: ModelConfig) -> ModelSpec | None:
    """A registered spec named by the config, checked against ``reasoning``; None lets the backend resolve
    the spec from the model's tokenizer (its chat template), with ``reasoning`` as the override."""

    return resolve_spec(config.spec, model_key(config), reasoning=config.reasoning) if config.spec else None


def _hf(config: ModelConfig, seed: int, server: Mapping[str, Any] | None = None) -> Generator:
    from recovery.backends.hf import HFGenerator  # lazy: loads torch

    settings: HFSettings = config.settings
    if settings.data_parallel_size > 1:
        from dataclasses import replace
        from functools import partial

        one = replace(config, settings=replace(settings, data_parallel_size=1))
        return ReplicatedGenerator(
            partial(make_generator, seed=seed), (one,), replicas=settings.data_parallel_size, name=config.name
        )
    spec = _declared_spec(config)
    if is_tiny_reasoner(model_location(config)):  # the checkpoint shipped with the package, in float32
        _one_cpu_thread_for_tiny_models(config)
        return HFGenerator(
            str(tiny_reasoner_dir()),
            spec=spec or get_spec(TINY_REASONER),
            dtype="float32",
            device=settings.device or "cpu",
            seed=seed,
            max_batch_rows=settings.batch_size * 8,
        )
    if spec is not None and spec.name == TINY_REASONER:
        _one_cpu_thread_for_tiny_models(config)
    return HFGenerator(
        model_location(config),
        spec=spec,
        reasoning=config.reasoning,
        dtype=settings.dtype,
        device=settings.device,
        seed=seed,
        max_batch_rows=settings.batch_size * 8,
        gguf_file=config.gguf_file,
    )


def vllm_engine_config(config: ModelConfig, seed: int) -> VLLMConfig:
    """The vLLM engine of a model: its ``path`` (else name), the run's seed, and each of its vLLM settings
    (`VLLMSettings`) as the engine argument of the same name."""
    settings: VLLMSettings = config.settings
    return VLLMConfig(model=config.path or config.name, seed=seed, **dataclasses.asdict(settings))


def _vllm(config: ModelConfig, seed: int, server: Mapping[str, Any] | None = None) -> Generator:
    return VLLMGenerator(vllm_engine_config(config, seed), spec=_declared_spec(config), reasoning=config.reasoning)


def _openai(config: ModelConfig, seed: int, server: Mapping[str, Any] | None = None) -> Generator:
    own: OpenAISettings = config.settings
    settings = {
        "prompt_format": own.prompt_format,
        "samples_per_request": own.samples_per_request,
        **resolved_fields(server or {}),  # what the probe before the run found: no probe again
    }
    model, tokenizer, spec = model_location(config), None, _declared_spec(config)
    if is_tiny_reasoner(model):  # served elsewhere; its tokenizer and conventions are the shipped checkpoint's
        tokenizer, spec = str(tiny_reasoner_dir()), spec or get_spec(TINY_REASONER)
    elif config.gguf_file:  # the server loaded the GGUF; its tokenizer and chat template are read from it here
        from transformers import AutoTokenizer

        name = Path(config.gguf_file).name
        tokenizer = AutoTokenizer.from_pretrained(model, gguf_file=name)
        spec = spec or spec_for(model_key(config), tokenizer, reasoning=config.reasoning)  # named by its file
        model = f"{model}:{name}"  # how transformers serve names a GGUF in a folder or repo
    return OpenAICompatGenerator(
        tokenizer=tokenizer,
        base_url=own.base_url,
        model=model,
        api_key=own.api_key,
        spec=spec,
        reasoning=config.reasoning,
        max_concurrency=own.max_concurrency,
        timeout_s=own.request_timeout_s,
        probe_timeout_s=own.probe_timeout_s,
        require_seed=own.require_seed,
        **settings,
    )


def _hf_live(
    model: Any, tokenizer: Any, spec: ModelSpec, *, seed: int, max_batch_rows: int = 64, **_: Any
) -> Generator:
    from recovery.backends.hf import HFGenerator  # lazy: loads torch

    return HFGenerator(model, tokenizer, spec=spec, seed=seed, max_batch_rows=max_batch_rows)


def _vllm_live(llm: Any, tokenizer: Any, spec: ModelSpec, *, seed: int, **options: Any) -> Generator:

    return VLLMEngineGenerator(llm, tokenizer, spec, seed=seed, **options)


def live_backends() -> tuple[str, ...]:
    """The registered backends that can generate with a model already loaded here (see `Backend.live`)."""
    return tuple(name for name, backend in BACKENDS.items() if backend.live is not None)


register(Backend("hf", HFSettings, _hf, live=_hf_live))
register(Backend("vllm", VLLMSettings, _vllm, live=_vllm_live))
register(Backend("openai", OpenAISettings, _openai, local_weights=False, local_tokenizer=True))


def model_location(config: ModelConfig) -> str:
    """Where ``config``'s weights are: ``path`` (a local folder or a Hub id), else ``name``."""
    return config.path or config.name


def local_weights(config: ModelConfig) -> Path | None:
    """The folder (or GGUF file) on this machine holding ``config``'s weights: the shipped tiny
    reasoner's, a local model folder, a ``gguf_file``, or for a Hub id the snapshot of the Hugging Face
    cache its ``main`` points to (a new revision downloaded there is another snapshot); None for a Hub id
    not cached here or a model behind a server."""
    if not backend_named(config.backend).local_weights:
        return None
    location = model_location(config)
    if is_tiny_reasoner(location):
        return tiny_reasoner_dir()
    if config.gguf_file and Path(config.gguf_file).is_file():
        return Path(config.gguf_file)
    folder = Path(location).expanduser()
    if folder.is_dir():
        return folder
    return _cached_snapshot(location)


def _cached_snapshot(repo_id: str) -> Path | None:
    """The Hugging Face cache's snapshot folder of model ``repo_id`` (the one holding its config.json), or
    None when it is not cached or not a valid repo id."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 — a name that is no valid repo id
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def check_loadable(config: ModelConfig, *, where: str = "model") -> None:
    """Raise `ConfigError` in one line, before any work, when ``config``'s weights cannot be found: the HF
    and vLLM backends need a local folder holding ``config.json`` (or the ``gguf_file``), or a Hub id that
    is in the local cache or, online, on the Hub. The OpenAI backend's model lives on its server, but its
    prompts are built here with the model's tokenizer, which must be found the same way."""
    from pathlib import Path

    backend = backend_named(config.backend)
    if is_tiny_reasoner(model_location(config)) or not (backend.local_weights or backend.local_tokenizer):
        return
    location = model_location(config)
    local = backend.local_weights
    needed = config.gguf_file or ("config.json" if local else "tokenizer_config.json")
    folder = Path(location).expanduser()
    if folder.exists() or location.startswith((".", "/", "~")):
        if not (folder / needed).is_file() and not (config.gguf_file and Path(config.gguf_file).is_file()):
            raise ConfigError(f"{where} {config.name!r}: {location} holds no {needed} (not a model folder)")
        return
    problem = _hub_problem(location, needed)
    if problem:
        why = "" if local else " (the openai backend builds prompts with the model's tokenizer: set path)"
        raise ConfigError(f"{where} {config.name!r}: {location!r} is not a local folder, and {problem}{why}")


def _hub_problem(repo_id: str, filename: str) -> str | None:
    """Why ``filename`` of Hub model ``repo_id`` cannot be had (None when it can): not cached while offline,
    or not on the Hub."""
    import os

    try:
        from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        return "huggingface_hub is not installed to fetch it"
    try:
        if isinstance(try_to_load_from_cache(repo_id, filename), str):
            return None
    except Exception:  # noqa: BLE001 — a name that is no valid repo id
        return "it is not a valid Hugging Face model id"
    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    if offline:
        return f"it is not in the Hugging Face cache ({filename}; HF_HUB_OFFLINE is set)"
    try:
        hf_hub_download(repo_id, filename)
    except Exception as err:  # noqa: BLE001 — any Hub failure means it cannot be loaded
        return f"the Hub does not give its {filename} ({type(err).__name__})"
    return None


def _one_cpu_thread_for_tiny_models(config: ModelConfig) -> None:
    """A 1M-parameter model decodes faster on one CPU thread: its matrices are too small to split, and on a
    busy machine intra-op threads spin against each other."""
    if (getattr(config.settings, "device", None) or "cpu") == "cpu":
        import torch

        torch.set_num_threads(1)
