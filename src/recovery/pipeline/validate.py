"""Loading a run config from YAML, and the checks of a whole `RunConfig` that need more than one field: names
resolved against the registries (datasets, toy families and options, interventions) and the files the run
will read. They run before any work, so a config the run cannot honour fails in one line naming its key, not
after traces were generated.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError, from_mapping, load_yaml
from recovery.run_config import RunConfig


def load_run_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Load and validate a run config (paths inside it are taken relative to the working directory).

    ``overrides`` replace top-level keys (e.g. ``{"run_dir": ...}`` from the command line).
    """
    data = load_yaml(path)
    if overrides:
        data = {**data, **overrides}
    config = from_mapping(RunConfig, data, where=str(path))
    check_run_config(config, where=str(path))
    return config


def check_run_config(config: RunConfig, *, where: str = "config", stages: Sequence[str] | None = None) -> None:
    """Raise `ConfigError` (``<where>.<key>: problem``) for the first value the run cannot honour. With the
    ``stages`` about to run, also what those stages need: the files they read (a config may name files that
    exist only on the machine that runs it) and the intervention LLM."""
    if stages is None or "problems" in stages:  # only the problems stage reads the dataset
        _check_dataset(config, where)
    _check_interventions(config, where)
    if stages is not None:
        _check_stage_needs(config, where, set(stages))


def _did_you_mean(value: str, known: list[str]) -> str:
    close = difflib.get_close_matches(value, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}"


def _check_dataset(config: RunConfig, where: str) -> None:
    ds = config.dataset
    base, _, sub = ds.name.partition("/")
    if base == "toy":
        from recovery.toy import FAMILIES, ToyTaskConfig

        if sub and sub not in FAMILIES:
            raise ConfigError(f"{where}.dataset.name: unknown toy family {sub!r}{_did_you_mean(sub, list(FAMILIES))}")
        allowed = ["seed", *(f.name for f in fields(ToyTaskConfig))]
        options = dict(ds.options)
        for key in options:
            if key not in allowed:
                raise ConfigError(f"{where}.dataset.options: unknown toy option {key!r}{_did_you_mean(key, allowed)}")
        options.pop("seed", None)
        if "families" in options:
            options["families"] = tuple(options["families"])
        try:
            ToyTaskConfig(**options)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}.dataset.options: {err}") from None
        return
    from recovery.data.registry import dataset_names

    known = dataset_names()
    if ds.name not in known:
        raise ConfigError(f"{where}.dataset.name: unknown dataset {ds.name!r}{_did_you_mean(ds.name, known)}")


def _check_interventions(config: RunConfig, where: str) -> None:
    from recovery.interventions import INTERVENTIONS

    cfg = config.interventions
    known = sorted(INTERVENTIONS)
    for i, name in enumerate(cfg.names):
        if name not in INTERVENTIONS:
            raise ConfigError(
                f"{where}.interventions.names[{i}]: unknown intervention {name!r}{_did_you_mean(name, known)}"
            )
    for name in cfg.options:
        if name not in cfg.names:
            raise ConfigError(f"{where}.interventions.options: {name!r} is not one of interventions.names")


def _check_stage_needs(config: RunConfig, where: str, stages: set[str]) -> None:
    from recovery.interventions import get_spec

    cfg = config.interventions
    if "traces" in stages and config.traces.source == "import":
        if not Path(config.traces.path or "").expanduser().is_file():
            raise ConfigError(f"{where}.traces.path: no such file: {config.traces.path}")
    if "chains" not in stages:
        return
    needs_llm = [name for name in cfg.names if get_spec(name).needs_generator]
    if needs_llm and cfg.llm is None:
        raise ConfigError(f"{where}.interventions.llm: {', '.join(needs_llm)} need an intervention LLM (set llm)")
    if "wikipedia_text" in cfg.names and "pool" not in cfg.options.get("wikipedia_text", {}):
        if not cfg.wikipedia_pool:
            raise ConfigError(f"{where}.interventions.wikipedia_pool: wikipedia_text needs a paragraphs file")
        if not Path(cfg.wikipedia_pool).expanduser().is_file():
            raise ConfigError(f"{where}.interventions.wikipedia_pool: no such file: {cfg.wikipedia_pool}")
