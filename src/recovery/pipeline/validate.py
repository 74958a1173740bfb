"""Loading a run config from YAML, and the checks of a whole `RunConfig` that need more than one field: names
resolved against the registries (datasets, toy families and options, interventions) and the files the run
will read. They run before any work, so a config the run cannot honour fails in one line naming its key, not
after traces were generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recovery.configs import ConfigError, did_you_mean, from_mapping, load_yaml
from recovery.data.registry import DATASETS, dataset_names
from recovery.interventions import INTERVENTIONS, get_spec
from recovery.interventions.reference_text import DATASETS_POOL
from recovery.pipeline.run_reuse import check_source_run, source_needed
from recovery.plan import plan_for
from recovery.run_config import RunConfig
from recovery.run_dir.files import check_run_dir_path


def load_run_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Load and validate a run config (paths inside it are taken relative to the working directory).

    ``overrides`` replace top-level keys (e.g. ``{"run_dir": ...}`` from the command line).
    """
    data = load_yaml(path, empty_ok=bool(overrides))  # an empty file is a mistake, not a run of defaults
    if overrides:
        data = {**data, **overrides}
    config = from_mapping(RunConfig, data, where=str(path))
    check_run_config(config, where=str(path))
    return config


# Set on a config whose whole-config checks passed, so a run of a loaded config does not repeat them.
_CHECKED = "_recovery_config_checked"


def check_run_config(config: RunConfig, *, where: str = "config", stages: Sequence[str] | None = None) -> None:
    """Raise `ConfigError` (``<where>.<key>: problem``) for the first value the run cannot honour.

    The checks of the config itself (names against the registries) run once: when it is loaded
    (`load_run_config`), or, for a config built in code, when it is first run. With the ``stages`` about to
    run, what those stages need of this machine is checked every time: the files they read (a config may
    name files that exist only on the machine that runs it), the intervention LLM, the Ray executor."""
    if not getattr(config, _CHECKED, False):
        check_run_dir_path(config.run_dir, where=f"{where}.run_dir")
        if stages is None or "problems" in stages:  # only the problems stage reads the dataset
            _check_dataset(config, where)
        _check_interventions(config, where)
        if stages is None or "problems" in stages:
            object.__setattr__(config, _CHECKED, True)  # a dataclass field would enter the manifest
    if stages is not None:
        _check_executor(config, where, stages)
        _check_stage_needs(config, where, set(stages))


def _check_dataset(config: RunConfig, where: str) -> None:

    ds = config.dataset
    known = dataset_names()
    if ds.name not in known:
        raise ConfigError(f"{where}.dataset.name: unknown dataset {ds.name!r}{did_you_mean(ds.name, known)}")
    try:
        DATASETS[ds.name.partition("/")[0]].check(ds.options)
    except ValueError as err:
        raise ConfigError(f"{where}.dataset.options: {err}") from None


def _check_executor(config: RunConfig, where: str, stages: Sequence[str] | None) -> None:
    """A Ray executor needs ray where the continuations are generated (its replicas replicate the model,
    so a model's own data parallelism is not stacked on them)."""
    import importlib.util

    if config.executor.kind != "ray" or (stages is not None and "continuations" not in stages):
        return
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"{where}.executor.kind: ray is not installed (pip install 'recovery[ray]')")
    for i, model in enumerate(config.models):
        if getattr(model.settings, "data_parallel_size", 1) > 1:
            raise ConfigError(
                f"{where}.models[{i}].data_parallel_size: set it to 1 with executor.kind=ray "
                "(executor.replicas replicates the model)"
            )


def _check_interventions(config: RunConfig, where: str) -> None:

    cfg = config.interventions
    known = sorted(INTERVENTIONS)
    for i, name in enumerate(cfg.names):
        if name not in INTERVENTIONS:
            raise ConfigError(
                f"{where}.interventions.names[{i}]: unknown intervention {name!r}{did_you_mean(name, known)}"
            )
    for name in cfg.options:
        if name not in cfg.names:
            raise ConfigError(f"{where}.interventions.options: {name!r} is not one of interventions.names")
    reads_datasets = plan_for(config).interventions.reads_datasets_pool
    if (cfg.wikipedia_pool or "").startswith(DATASETS_POOL) and not reads_datasets:
        raise ConfigError(
            f"{where}.interventions.wikipedia_pool: a datasets: source is the authors' pool (protocol: reference); "
            "the default protocol reads a paragraphs file"
        )


def _check_stage_needs(config: RunConfig, where: str, stages: set[str]) -> None:

    cfg = config.interventions
    if "traces" in stages and config.traces.source == "import":
        if not Path(config.traces.path or "").expanduser().is_file():
            raise ConfigError(f"{where}.traces.path: no such file: {config.traces.path}")
    if stages & {"problems", "traces", "filter"} and config.traces.source == "run":
        if source_needed(config):
            check_source_run(config, where=where)
    solved = config.traces.filters.reference_solved
    if "problems" in stages and solved is not None and solved.path is not None:
        if not Path(solved.path).expanduser().is_file():
            raise ConfigError(f"{where}.traces.filters.reference_solved.path: no such file: {solved.path}")
    if "chains" not in stages:
        return
    needs_llm = [name for name in cfg.names if get_spec(name).needs_generator]
    if needs_llm and cfg.llm is None:
        raise ConfigError(f"{where}.interventions.llm: {', '.join(needs_llm)} need an intervention LLM (set llm)")
    needs_pool = [name for name in cfg.names if get_spec(name).needs_pool and "pool" not in cfg.options.get(name, {})]
    if needs_pool:
        if not cfg.wikipedia_pool:
            raise ConfigError(f"{where}.interventions.wikipedia_pool: {', '.join(needs_pool)} needs a paragraphs file")
        streamed = cfg.wikipedia_pool.startswith("datasets:")  # the authors' pool (see _check_interventions)
        if not streamed and not Path(cfg.wikipedia_pool).expanduser().is_file():
            raise ConfigError(f"{where}.interventions.wikipedia_pool: no such file: {cfg.wikipedia_pool}")
