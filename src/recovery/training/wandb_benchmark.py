"""A benchmark run directory to Weights & Biases (``recovery run`` with a ``wandb`` section): its aggregates,
clean accuracy and robustness curves, with the run's protocol in the W&B config so runs can be compared; and
the directory itself as an Artifact (`run_artifact`, type ``benchmark-run``) that the training runs built
from it declare as their input (`use_benchmark_runs`), so W&B's lineage links a training curve to the run
directory behind it (same files, same artifact digest, same version).

Offline with ``WANDB_MODE=offline``; nothing here needs the network. W&B cannot use an artifact offline: an
offline training run records the artifacts it would use in its config (``benchmark_runs``) instead.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recovery.ids import content_id
from recovery.metrics import LEVELS
from recovery.run_dir import MANIFEST, Run, is_run_dir, open_run
from recovery.run_dir.lock import LOCK_FILE
from recovery.training.wandb_logging import robustness_curves, table_cell


def benchmark_config(run: Run) -> dict[str, Any]:
    """The W&B config of a benchmark run: its manifest (``config.json``, nested as written, API keys left
    out; empty for a folder without one) and flat ``bench/`` keys to filter and group runs by.

    ``bench/models`` (names), ``bench/model_paths``, ``bench/dataset``, ``bench/dataset_limit``,
    ``bench/interventions``, ``bench/timesteps``, ``bench/n_samples`` (N continuations per chain), the
    continuations' decoding (``bench/temperature``, ``bench/top_p``, ``bench/top_k``,
    ``bench/max_new_tokens``, ``bench/seed``) and the grading protocol (``bench/grading_protocol``, the
    sentence `GradingConfig.protocol` writes, and ``bench/grading_primary``, ``bench/judge``,
    ``bench/judge_prompt``, ``bench/unclosed``). A manifest the current `RunConfig` cannot read gives the
    manifest alone.
    """

    if not is_run_dir(run.path):
        return {}
    out: dict[str, Any] = _without_secrets(dict(run.manifest))
    try:
        config = run.config
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


ARTIFACT_TYPE = "benchmark-run"


def artifact_name(run_dir: str | Path) -> str:
    """The W&B artifact name of a run directory: ``benchmark-<folder name>`` in W&B's allowed characters."""
    return "benchmark-" + re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run_dir).resolve().name).strip("-")


def run_artifact(run_dir: str | Path) -> Any:
    """The run directory as a ``wandb.Artifact`` (every file but the writer's lock; the manifest with its API keys
    left out), with the run's protocol (`benchmark_config`'s ``bench/`` keys and the config id) as metadata. Its
    digest depends on the files only, so the benchmark run's and a training run's artifacts of one unchanged
    directory are one version."""
    import json

    import wandb

    run = open_run(run_dir)
    path = run.path
    manifest = run.manifest if is_run_dir(path) else {}
    metadata = {k: v for k, v in benchmark_config(run).items() if k.startswith("bench/")}
    metadata["config_id"] = content_id("run-config", manifest) if manifest else None
    artifact = wandb.Artifact(
        artifact_name(path), type=ARTIFACT_TYPE, description=f"recovery run directory {path.name}", metadata=metadata
    )
    for file in sorted(p for p in path.rglob("*") if p.is_file() and p.name != LOCK_FILE):
        name = file.relative_to(path).as_posix()
        if name == MANIFEST and manifest:  # a W&B artifact is shared with whoever sees the project
            with artifact.new_file(MANIFEST, mode="w", encoding="utf-8") as f:
                f.write(json.dumps(_without_secrets(manifest), indent=2, sort_keys=True))
        else:
            artifact.add_file(str(file), name=name)
    return artifact


def use_benchmark_runs(run_dirs: Any, *, run: Any = None) -> list[dict[str, Any]]:
    """Declare the benchmark run directories ``run_dirs`` (those that exist) inputs of the W&B run: their
    `run_artifact`s, through ``use_artifact``. Offline, where W&B cannot use an artifact, each is recorded in
    the run config under ``benchmark_runs`` (name, digest, path). Returns what was declared."""
    import wandb

    run = run or wandb.run
    used = []
    for run_dir in dict.fromkeys(str(d) for d in run_dirs or () if d):
        if run is None or not Path(run_dir).is_dir():
            continue
        artifact = run_artifact(run_dir)
        used.append({"artifact": artifact.name, "digest": artifact.digest, "path": str(Path(run_dir).resolve())})
        if run.settings.mode != "offline":
            run.use_artifact(artifact)
    if used and run is not None and run.settings.mode == "offline":
        run.config.update({"benchmark_runs": used}, allow_val_change=True)
    return used


def log_run_to_wandb(run_dir: str | Path, wandb_config: Any = None, *, dir: str | Path | None = None) -> str:
    """Log a benchmark run directory (its ``aggregates.json``, ``clean_accuracy.json`` and config) to W&B.

    ``wandb_config`` is the run config's `recovery.run_config.WandbConfig` (project, entity, run_name,
    tags) or None (project ``recovery``, run named after the directory). The W&B config is
    `benchmark_config` of the run's manifest. Logged: ``aggregates`` (a Table of every aggregate row),
    ``clean_accuracy`` (a Table), one ``curves/{model}/{domain}/{level}`` line series per model × domain ×
    robustness level (one line per intervention, against the timestep), summary scalars
    ``{model}/{domain}/{intervention}/{level}`` (mean over timesteps), and the directory as an artifact
    (`run_artifact`). Returns the W&B run's local directory. Offline with ``WANDB_MODE=offline``.
    """
    import wandb

    run = open_run(run_dir)
    if not run.path.is_dir():
        raise FileNotFoundError(f"{run.path} is not a run directory")
    rows = run.aggregates()
    if not rows:
        raise FileNotFoundError(f"{run.path} has no aggregates yet; run its `aggregate` stage first")
    clean = run.clean_accuracy()
    project = getattr(wandb_config, "project", None) or "recovery"
    wb = wandb.init(
        project=project,
        entity=getattr(wandb_config, "entity", None),
        name=getattr(wandb_config, "run_name", None) or run.path.name,
        tags=list(getattr(wandb_config, "tags", None) or []),
        config=benchmark_config(run),
        dir=str(dir) if dir is not None else None,
        job_type="benchmark",
        reinit="create_new",
        settings=wandb.Settings(silent=True),  # the caller prints where the run went
    )
    try:
        columns = sorted({k for row in rows for k in row})
        payload: dict[str, Any] = {
            "aggregates": wandb.Table(
                columns=columns, data=[[table_cell(row.get(c)) for c in columns] for row in rows]
            ),
        }
        if clean:
            clean_cols = sorted({k for row in clean for k in row})
            payload["clean_accuracy"] = wandb.Table(
                columns=clean_cols, data=[[table_cell(row.get(c)) for c in clean_cols] for row in clean]
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
        wb.log_artifact(run_artifact(run.path))
        return str(Path(wb.dir).parent)
    finally:
        wb.finish()


__all__ = [
    "ARTIFACT_TYPE",
    "artifact_name",
    "benchmark_config",
    "log_run_to_wandb",
    "run_artifact",
    "use_benchmark_runs",
]
