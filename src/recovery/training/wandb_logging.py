"""Robustness results to Weights & Biases during training: the settings that tell one run from another in
the run config, and each checkpoint's robustness-vs-timestep curve and table under stable keys.

W&B honours ``WANDB_MODE=offline`` (files under ``WANDB_DIR``, upload later with ``wandb sync``); nothing
here needs the network. A whole benchmark run directory goes to W&B through
`recovery.training.wandb_benchmark.log_run_to_wandb`.

* The run config gets the mini-benchmark's settings (`recovery.training.callback`) and the recipe's script
  arguments (`recovery.training.common.RecipeConfigCallback`) once, at the start (`update_run_config`,
  beside what transformers' ``WandbCallback`` puts there: the training arguments and the model config), so
  runs can be filtered and grouped by them.
* Each evaluation logs the curve of that checkpoint under stable keys, ``robustness/curve`` (a
  ``wandb.plot.line_series``: one line per intervention, majority robustness against the timestep) and
  ``robustness/table`` (its per-(intervention, timestep) rows, with the step), together with
  ``train/global_step``: every version stays in the run's history at its step, and the W&B UI shows
  the latest.
* Each evaluation also adds a sample of what the model wrote to one incremental table,
  ``robustness/samples`` (`log_samples`: step, chain, intervention, t, continuation, verdict, doubt): rows
  accumulate over the run, so the table shows how the continuations changed from step to step.
* The scalars go through ``Trainer.log`` (one key per quantity, a line over the global step), not through
  this module.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

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


SAMPLE_COLUMNS: tuple[str, ...] = ("step", "chain", "intervention", "t", "continuation", "verdict", "doubt")
#: A continuation longer than this is cut in the samples table (its verdict is the whole text's).
SAMPLE_CHARS = 4000


def sample_rows(samples: Sequence[Mapping[str, Any]], k: int, step: int) -> list[list[Any]]:
    """At most ``k`` of an evaluation's continuation records as table rows (`SAMPLE_COLUMNS`): the same number
    from each intervention as far as it goes (round robin), each intervention's records in an order seeded
    by ``step``, so every intervention shows and the rows differ from one evaluation to the next."""
    import random

    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in samples:
        groups[str(record.get("intervention"))].append(record)
    rng = random.Random(step)
    queues = [rng.sample(group, len(group)) for _, group in sorted(groups.items())]
    picked: list[Mapping[str, Any]] = []
    while len(picked) < k and any(queues):
        for queue in queues:
            if queue and len(picked) < k:
                picked.append(queue.pop())
    rows = []
    for r in picked:
        text = str(r.get("continuation") or "")
        text = text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"
        rows.append([step, r.get("chain"), r.get("intervention"), r.get("t"), text, r.get("verdict"), r.get("doubt")])
    return rows


def log_samples(table: Any, result: Any, step: int, *, k: int, prefix: str = "robustness", run: Any = None) -> Any:
    """Add `sample_rows` of ``result.samples`` to ``table`` (an incremental ``wandb.Table`` of `SAMPLE_COLUMNS`;
    None: a new one) and log it as ``{prefix}/samples`` at ``step``; returns the table to pass next time."""
    import wandb

    run = run or wandb.run
    if run is None:
        return table
    if table is None:
        try:
            table = wandb.Table(columns=list(SAMPLE_COLUMNS), log_mode="INCREMENTAL")
        except (TypeError, ValueError):  # a wandb without incremental tables: every row so far, logged whole
            table = []
    rows = sample_rows(getattr(result, "samples", None) or [], k, step)
    if isinstance(table, list):
        table += rows
        run.log({f"{prefix}/samples": wandb.Table(columns=list(SAMPLE_COLUMNS), data=table), "train/global_step": step})
        return table
    for row in rows:
        table.add_data(*row)
    run.log({f"{prefix}/samples": table, "train/global_step": step})
    return table


def table_cell(value: Any) -> Any:
    """A value as a W&B table cell: non-finite floats become empty cells."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def robustness_table(rows: Sequence[Mapping[str, Any]], step: int | None = None):
    """A ``wandb.Table`` of per-(intervention, timestep) rows (see `MiniBenchResult.per_timestep`)."""
    import wandb

    data = [[step if c == "step" else table_cell(row.get(c)) for c in TABLE_COLUMNS] for row in rows]
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


def reports_to_wandb(args: Any) -> bool:
    """Whether a trainer's arguments report to W&B (``"wandb"`` in ``report_to``)."""
    return "wandb" in (getattr(args, "report_to", None) or [])


def active_run(args: Any) -> Any:
    """The active W&B run when the trainer's arguments report to W&B, else None."""
    if not reports_to_wandb(args):
        return None
    try:
        import wandb
    except ImportError:
        return None
    return wandb.run


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
        log.warning(
            "W&B config: kept the values already there for %s (another value was offered)", ", ".join(sorted(kept))
        )
    if new:
        run.config.update(new)
    if replaced:
        run.config.update(replaced, allow_val_change=True)
    return {**new, **replaced}


__all__ = [
    "SAMPLE_COLUMNS",
    "TABLE_COLUMNS",
    "active_run",
    "config_values",
    "log_robustness_step",
    "log_samples",
    "reports_to_wandb",
    "robustness_curves",
    "robustness_table",
    "sample_rows",
    "table_cell",
    "update_run_config",
]
