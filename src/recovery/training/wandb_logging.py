"""Robustness results to Weights & Biases: the settings that tell one run from another in the run config,
the per-checkpoint robustness-vs-timestep curve under one key, and a whole benchmark run
(`log_run_to_wandb`, for ``recovery run``).

W&B honours ``WANDB_MODE=offline`` (files under ``WANDB_DIR``, upload later with ``wandb sync``); nothing
here needs the network. `read_offline_run` reads such an offline run back (history rows, config, summary and
table files), which is how the tests check what was logged.

During training (`recovery.training.callback`):

* the run config gets the mini-benchmark's settings and the recipe's script arguments once, at the start
  (`update_run_config`, beside what transformers' ``WandbCallback`` puts there: the training arguments and
  the model config), so runs can be filtered and grouped by them;
* each evaluation logs the curve of that checkpoint under stable keys, ``robustness/curve`` (a
  ``wandb.plot.line_series``: one line per intervention, majority robustness against the timestep) and
  ``robustness/table`` (its per-(intervention, timestep) rows, with the step), together with
  ``train/global_step``: every version stays in the run's history at its step, and the W&B UI shows
  the latest;
* the scalars go through ``Trainer.log`` (one key per quantity, a line over the global step), not through
  this module.
"""

from __future__ import annotations

import json
import math
import struct
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE_COLUMNS: tuple[str, ...] = (
    "step",
    "intervention",
    "timestep",
    "n_chains",
    "majority",
    "at_least_once",
    "all",
    "length_overhead_pct",
    "remaining_overhead_pct",
    "doubt_rate",
)


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def robustness_table(rows: Sequence[Mapping[str, Any]], step: int | None = None):
    """A ``wandb.Table`` of per-(intervention, timestep) rows (see `MiniBenchResult.per_timestep`)."""
    import wandb

    data = [[step if c == "step" else _cell(row.get(c)) for c in TABLE_COLUMNS] for row in rows]
    return wandb.Table(columns=list(TABLE_COLUMNS), data=data)


def robustness_curves(
    rows: Sequence[Mapping[str, Any]],
    *,
    level: str = "majority",
    series: str = "intervention",
    x: str = "timestep",
    title: str = "",
):
    """``wandb.plot.line_series``: one line per ``series`` value, ``level`` against ``x`` (sorted by x)."""
    import wandb

    lines: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        value = row.get(level)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        lines[str(row[series])].append((float(row[x]), float(value)))
    keys = sorted(lines)
    xs = [[p[0] for p in sorted(lines[k])] for k in keys]
    ys = [[p[1] for p in sorted(lines[k])] for k in keys]
    return wandb.plot.line_series(xs=xs, ys=ys, keys=keys, title=title or f"{level} robustness vs {x}", xname=x)


def log_robustness_step(result, step: int, *, prefix: str = "robustness", run: Any = None) -> dict[str, Any]:
    """Log one evaluation's curve (``{prefix}/curve``) and table (``{prefix}/table``) to the active W&B run;
    returns what was logged.

    The keys are the same at every evaluation: one chart and one table, with a version per training step.
    ``train/global_step`` is logged with them: `transformers.integrations.WandbCallback` makes it the
    x-axis of every metric (``define_metric("*", step_metric="train/global_step")``).
    """
    import wandb

    run = run or wandb.run
    if run is None:
        return {}
    payload = {
        f"{prefix}/curve": robustness_curves(result.per_timestep, title="majority robustness vs timestep"),
        f"{prefix}/table": robustness_table(result.per_timestep, step),
        "train/global_step": step,
    }
    run.log(payload)
    return payload


def config_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as W&B stores config values: JSON types only (tuples become lists, other objects strings),
    so a value can be compared with what the run's config already holds."""
    return {str(k): json.loads(json.dumps(v, default=str)) for k, v in values.items()}


def update_run_config(values: Mapping[str, Any], *, run: Any = None, owned: str | None = None) -> dict[str, Any]:
    """Add ``values`` to the W&B run's config without replacing what others put there; returns what was written.

    A key the config lacks is added. One it already holds with the same value is left as it is. One it
    holds with another value was set by someone else (transformers' ``WandbCallback`` writes the training
    arguments and the model config; a user may have called ``wandb.init(config=...)``): it is kept and a
    warning names it, unless the key starts with ``owned``, a prefix only the caller writes (the callback's
    ``robustness/`` settings). Those are replaced (``allow_val_change``): a run that W&B keeps open across
    two ``train()`` calls then shows the settings of the latest.
    """
    import logging

    import wandb

    run = run or wandb.run
    if run is None:
        return {}
    current = run.config
    new: dict[str, Any] = {}
    replaced: dict[str, Any] = {}
    kept: list[str] = []
    for key, value in config_values(values).items():
        if key not in current:
            new[key] = value
        elif current.get(key) == value:
            continue
        elif owned and key.startswith(owned):
            replaced[key] = value
        else:
            kept.append(key)
    if kept:
        logging.getLogger(__name__).warning(
            "W&B config: kept the values already there for %s (another value was offered)", ", ".join(sorted(kept))
        )
    if new:
        run.config.update(new)
    if replaced:
        run.config.update(replaced, allow_val_change=True)
    return {**new, **replaced}


# ------------------------------------------------------------------------------------ a benchmark run


def benchmark_config(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The W&B config of a benchmark run: its manifest (``config.json``, nested as written, API keys left
    out) and flat ``bench/`` keys to filter and group runs by.

    ``bench/models`` (names), ``bench/model_paths``, ``bench/dataset``, ``bench/dataset_limit``,
    ``bench/interventions``, ``bench/timesteps``, ``bench/n_samples`` (N continuations per chain), the
    continuations' decoding (``bench/temperature``, ``bench/top_p``, ``bench/top_k``,
    ``bench/max_new_tokens``, ``bench/seed``) and the grading protocol (``bench/grading_protocol``, the
    sentence `GradingConfig.protocol` writes, and ``bench/grading_primary``, ``bench/judge``,
    ``bench/judge_prompt``, ``bench/unclosed``). A manifest the current `RunConfig` cannot read gives the
    manifest alone.
    """
    from recovery.configs import from_mapping
    from recovery.run_config import RunConfig

    out: dict[str, Any] = _without_secrets(dict(manifest))
    try:
        config = from_mapping(RunConfig, manifest, where="config.json")
    except (TypeError, ValueError):  # ConfigError is a ValueError
        return out
    sampling, grading = config.continuation, config.grading
    out.update(
        {
            "bench/models": [m.name for m in config.models],
            "bench/model_paths": [m.path or m.name for m in config.models],
            "bench/dataset": config.dataset.name,
            "bench/dataset_limit": config.dataset.limit,
            "bench/interventions": list(config.interventions.names),
            "bench/timesteps": list(config.interventions.timesteps),
            "bench/n_samples": sampling.n,
            "bench/temperature": sampling.temperature,
            "bench/top_p": sampling.top_p,
            "bench/top_k": sampling.top_k,
            "bench/max_new_tokens": sampling.max_new_tokens,
            "bench/seed": sampling.seed,
            "bench/grading_protocol": grading.protocol(),
            "bench/grading_primary": grading.primary,
            "bench/judge": grading.judge.name if grading.judge is not None else None,
            "bench/judge_prompt": grading.judge_prompt,
            "bench/unclosed": grading.unclosed,
        }
    )
    return out


def _without_secrets(value: Any) -> Any:
    """``value`` with every ``api_key`` entry removed (a W&B config is shared with whoever sees the project)."""
    if isinstance(value, Mapping):
        return {k: _without_secrets(v) for k, v in value.items() if k != "api_key"}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


def log_run_to_wandb(run_dir: str | Path, wandb_config: Any = None, *, dir: str | Path | None = None) -> str:
    """Log a benchmark run directory (its ``aggregates.json``, ``clean_accuracy.json`` and config) to W&B.

    ``wandb_config`` is the run config's `recovery.pipeline.config.WandbConfig` (project, entity, run_name,
    tags) or None (project ``recovery``, run named after the directory). The W&B config is
    `benchmark_config` of the run's manifest. Logged: ``aggregates`` (a Table of every aggregate row),
    ``clean_accuracy`` (a Table), one ``curves/{model}/{domain}/{level}`` line series per model × domain ×
    robustness level (one line per intervention, against the timestep), and summary scalars
    ``{model}/{domain}/{intervention}/{level}`` (mean over timesteps). Returns the W&B run's local
    directory. Offline with ``WANDB_MODE=offline``.
    """
    import wandb

    from recovery.metrics import LEVELS
    from recovery.pipeline.aggregate import read_aggregates, read_clean_accuracy
    from recovery.store import RunDir

    run = RunDir(run_dir)
    if not run.path.is_dir():
        raise FileNotFoundError(f"{run.path} is not a run directory")
    rows = read_aggregates(run)
    if not rows:
        raise FileNotFoundError(f"{run.path} has no aggregates yet; run its `aggregate` stage first")
    clean = read_clean_accuracy(run)
    manifest_path = run.file("config.json")
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    project = getattr(wandb_config, "project", None) or "recovery"
    wb = wandb.init(
        project=project,
        entity=getattr(wandb_config, "entity", None),
        name=getattr(wandb_config, "run_name", None) or run.path.name,
        tags=list(getattr(wandb_config, "tags", None) or []),
        config=benchmark_config(manifest),
        dir=str(dir) if dir is not None else None,
        job_type="benchmark",
        reinit="create_new",
        settings=wandb.Settings(silent=True),  # the caller prints where the run went
    )
    try:
        columns = sorted({k for row in rows for k in row})
        payload: dict[str, Any] = {
            "aggregates": wandb.Table(columns=columns, data=[[_cell(row.get(c)) for c in columns] for row in rows]),
        }
        if clean:
            clean_cols = sorted({k for row in clean for k in row})
            payload["clean_accuracy"] = wandb.Table(
                columns=clean_cols, data=[[_cell(row.get(c)) for c in clean_cols] for row in clean]
            )
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[(str(row.get("model")), str(row.get("domain")))].append(row)
        for (model, domain), group in sorted(groups.items()):
            for level in LEVELS:
                payload[f"curves/{model}/{domain}/{level}"] = robustness_curves(
                    group, level=f"{level}_mean", x="target_t", title=f"{model} · {domain}: {level} robustness"
                )
        wb.log(payload)
        means: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
        for row in rows:
            for level in (*LEVELS, "whole_pct"):
                value = row.get(f"{level}_mean")
                if isinstance(value, (int, float)) and math.isfinite(value):
                    means[(str(row.get("model")), str(row.get("domain")), str(row.get("intervention")), level)].append(
                        value
                    )
        for (model, domain, intervention, level), values in means.items():
            wb.summary[f"{model}/{domain}/{intervention}/{level}"] = sum(values) / len(values)
        for row in clean:
            if isinstance(row.get("accuracy"), (int, float)):
                wb.summary[f"{row.get('model')}/{row.get('domain')}/clean_accuracy"] = row["accuracy"]
        return str(Path(wb.dir).parent)
    finally:
        wb.finish()


# ----------------------------------------------------------------------------- reading offline runs back

_HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
_RECORD = struct.Struct("<IHB")  # crc32, length, type
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def iter_records(path: str | Path) -> Iterator[Any]:
    """The protobuf ``Record`` messages of an offline ``run-*.wandb`` file.

    The file is W&B's LevelDB-style log (what ``wandb-core`` writes and ``wandb sync`` reads): a 7-byte
    header, then 32 KiB blocks of chunks (crc32, length, FULL/FIRST/MIDDLE/LAST), each record one
    serialized ``wandb.proto.wandb_internal_pb2.Record``.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, _ = _HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = _HEADER.size, b""
    while pos + _RECORD.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD.size:  # block trailer padding
            pos += left
            continue
        _, length, kind = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        chunk = data[pos : pos + length]
        pos += length
        if kind == _FULL:
            payload = chunk
        elif kind == _FIRST:
            pending = chunk
            continue
        elif kind == _MIDDLE:
            pending += chunk
            continue
        elif kind == _LAST:
            payload, pending = pending + chunk, b""
        else:  # zero padding at the end of a block or file
            continue
        record = pb.Record()
        record.ParseFromString(payload)
        yield record


@dataclass
class OfflineRun:
    """An offline W&B run read back: ``history`` rows (key → decoded JSON value), ``summary``, ``config``
    (key → value) and whether the run's exit record was seen (``complete``)."""

    path: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    complete: bool = False

    @property
    def files(self) -> Path:
        return self.path / "files"

    def keys(self) -> set[str]:
        return {k for row in self.history for k in row}

    def table(self, row: Mapping[str, Any], key: str) -> dict[str, Any]:
        """The JSON of a table logged under ``key`` in ``row`` (``{"columns": [...], "data": [...]}``)."""
        return json.loads((self.files / row[f"{key}/path"]).read_text())


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def _decode(value_json: str) -> Any:
    try:
        return json.loads(value_json)
    except ValueError:
        return value_json


def _read_once(run_path: Path) -> OfflineRun:
    (log_file,) = run_path.glob("run-*.wandb")
    out = OfflineRun(run_path)
    for record in iter_records(log_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            out.history.append({_item_key(i): _decode(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                out.summary[_item_key(item)] = _decode(item.value_json)
        elif kind in ("config", "run"):
            updates = record.config.update if kind == "config" else record.run.config.update
            for item in updates:
                out.config[_item_key(item)] = _decode(item.value_json)
        elif kind == "exit":
            out.complete = True
    return out


def read_offline_run(run_path: str | Path, *, wait_s: float = 15.0) -> OfflineRun:
    """Read an offline run directory (``.../wandb/offline-run-*``).

    ``wandb.finish()`` can return before the W&B service has flushed the transaction log, so this waits
    up to ``wait_s`` seconds for the run's exit record (``complete``) before returning what is there.
    """
    import time

    run_path = Path(run_path)
    deadline = time.monotonic() + wait_s
    while True:
        run = _read_once(run_path)
        if run.complete or time.monotonic() >= deadline:
            return run
        time.sleep(0.1)


def offline_runs(wandb_dir: str | Path) -> list[Path]:
    """The offline run directories under ``wandb_dir`` (its ``wandb/`` subfolder or itself), oldest first."""
    root = Path(wandb_dir)
    base = root / "wandb" if (root / "wandb").is_dir() else root
    return sorted(p for p in base.glob("offline-run-*") if p.is_dir())


__all__ = [
    "TABLE_COLUMNS",
    "OfflineRun",
    "benchmark_config",
    "config_values",
    "iter_records",
    "log_robustness_step",
    "log_run_to_wandb",
    "offline_runs",
    "read_offline_run",
    "robustness_curves",
    "robustness_table",
    "update_run_config",
]
