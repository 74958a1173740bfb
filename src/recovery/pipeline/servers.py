"""Pre-flight for models behind a server: probe each one's server once, before any work, so that every
generator of the run (in this process or on Ray replicas) uses the same settings and a server that
cannot serve the run fails in one line naming the model, the server and its reason."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recovery.backends.openai_probe import ServerError, settings_record
from recovery.backends.registry import make_generator
from recovery.configs import ConfigError
from recovery.model_config import ModelConfig, model_spec
from recovery.run_config import RunConfig


def needs_top_k(config: RunConfig, model: ModelConfig) -> bool:
    """Whether any decoding ``model`` may be asked for in ``config`` sets top_k: the continuations', the
    original traces' or the model's own (recommended) decoding."""
    spec = model_spec(model)
    settings = (config.continuation.top_k, config.traces.sampling.top_k, model.top_k, spec.trace_decoding.top_k)
    return any(top_k is not None for top_k in settings)


def probe_servers(config: RunConfig, models: Sequence[tuple[str, ModelConfig]]) -> dict[str, dict[str, Any]]:
    """The settings probed from the server of each openai model in ``models`` (``(where, model)`` pairs),
    by model name (`recovery.backends.openai_probe.settings_record`). Raises `ConfigError` for a server
    that does not answer or cannot honour what the run needs."""

    probed: dict[str, dict[str, Any]] = {}
    for where, model in models:
        if model.backend != "openai" or model.name in probed:
            continue
        generator = make_generator(model)
        try:
            resolved = generator.probe(needs_top_k=needs_top_k(config, model))
        except ServerError as err:
            raise ConfigError(f"{where} {model.name!r}: {err}") from None
        finally:
            generator.close()
        probed[model.name] = settings_record(resolved)
    return probed
