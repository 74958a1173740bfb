"""The run-directory side of the ablations: read runs, build the sections, store them, re-render reports.

Each analysis stores its section (`recovery.report.sections_store`) and its raw numbers
(``results.json``) under ``RUN_DIR/analysis/<name>/`` of every run it used, then rewrites those runs'
reports, so each run's report shows the ablation it took part in.

- ``ablation_wait``: `analyze_wait(BASE_RUN, WAIT_RUN)` (Tables 7–8).
- ``ablation_swap``: `analyze_swap([RUN, ...])` — runs made with ``swap_to`` (Table 9).
- ``ablation_repeats``: `analyze_repeats([RUN, ...])` — one run per k; k is read from each run's config.
  `run_repeats_sweep(config, ks)` runs one config for every k into ``<run_dir>/k<k>`` first.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recovery.analysis import ablations as ab
from recovery.configs import to_mapping
from recovery.pipeline import run_pipeline
from recovery.pipeline.between import repeat_configs
from recovery.pipeline.stages import STAGES
from recovery.report.data import Section
from recovery.report.run_report import rewrite_report
from recovery.report.sections_store import analysis_dir, save_section
from recovery.run_config import RunConfig
from recovery.run_dir import (
    CLEAN_ACCURACY_FILE,
    MANIFEST,
    Run,
    chain_outcomes,
    is_run_dir,
    open_run,
)
from recovery.store import atomic_write_text

WAIT, SWAP, REPEATS = "ablation_wait", "ablation_swap", "ablation_repeats"
RESULTS_FILE = "results.json"
# Config keys that never change an ablation's numbers (bookkeeping only).
BOOKKEEPING = ("run_dir", "title", "wandb", "flush_every")


@dataclass(frozen=True)
class AblationRun:
    """A run directory with its config and aggregate rows."""

    path: Path
    config: RunConfig
    rows: list[dict[str, Any]]

    @property
    def run(self) -> Run:
        return open_run(self.path)


def load_ablation_run(path: str | Path, *, need_aggregates: bool = True) -> AblationRun:
    """Read an ablation arm's run directory (its config and aggregate rows); a clear error when it is not one or has not been aggregated yet."""
    path = Path(path)
    run = open_run(path)
    config = run.config
    rows = run.aggregates()
    if need_aggregates and not rows:
        raise ValueError(f"{path}: no aggregate rows (aggregates.json missing or empty); run its aggregate stage first")
    return AblationRun(path, config, rows)


def config_differences(a: RunConfig, b: RunConfig, ignore: Iterable[str] = BOOKKEEPING) -> list[str]:
    """Dotted config keys whose values differ between ``a`` and ``b`` (``ignore`` lists dotted prefixes)."""
    skip = tuple(ignore)
    out: list[str] = []

    def walk(x: Any, y: Any, prefix: str) -> None:
        if any(prefix == s or prefix.startswith(s + ".") for s in skip):
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y)):
                walk(x.get(key), y.get(key), f"{prefix}.{key}" if prefix else key)
        elif x != y:
            out.append(prefix)

    walk(to_mapping(a), to_mapping(b), "")
    return out


def store(paths: Sequence[Path], name: str, section: Section, results: Any, *, render: bool = True) -> None:
    """Save ``section`` and ``results`` as analysis ``name`` of every run in ``paths``; re-render reports."""
    text = json.dumps(_jsonable(results), indent=1, sort_keys=True, ensure_ascii=False)
    for path in dict.fromkeys(Path(p) for p in paths):  # each run once, in order
        save_section(path, name, section)
        atomic_write_text(analysis_dir(path, name) / RESULTS_FILE, text)
        if render:
            rerender(path)


def rerender(path: str | Path) -> Path:
    """Rewrite a run's report (with every stored analysis section); returns the HTML path."""
    return rewrite_report(path)


def _jsonable(value: Any) -> Any:
    # JSON has no NaN; null reads back as missing (as in aggregates.json).
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# ------------------------------------------------------------------------------------ append "Wait"


def analyze_wait(base_dir: str | Path, wait_dir: str | Path, *, render: bool = True) -> ab.WaitComparison:
    """Tables 7–8 from a base run and a run with ``interventions.append_wait: true``; stored in both."""
    base, wait = load_ablation_run(base_dir), load_ablation_run(wait_dir)
    if base.config.interventions.append_wait:
        raise ValueError(f"base run {base.path} has interventions.append_wait=true; pass the run without Wait first")
    if not wait.config.interventions.append_wait:
        raise ValueError(
            f"wait run {wait.path} has interventions.append_wait=false; it must be made with append_wait: true"
        )
    comp = ab.match_wait(base.rows, wait.rows)
    if not comp.deltas:
        raise ValueError(
            f"no aggregate group of {base.path} matches one of {wait.path} (model, domain, intervention, t)"
        )
    notes = []
    diffs = config_differences(base.config, wait.config, (*BOOKKEEPING, "interventions.append_wait"))
    if diffs:
        notes.append("**Warning:** the two runs' configs also differ in " + ", ".join(f"`{d}`" for d in diffs) + ".")
    shared, total = _shared_traces(base.run, wait.run)
    notes.append(f"Original traces intervened on in both runs: {shared} of {total} in the base run.")
    if shared < total:
        notes.append(
            "To compare on the very same traces, copy `problems/`, `traces/`, `kept/` and "
            "`clean_accuracy.json` of the base run into the wait run before running it (`copy_originals`)."
        )
    section = ab.wait_section(comp, base_label=str(base.path), wait_label=str(wait.path), notes=notes)
    results = {
        "base_run": str(base.path),
        "wait_run": str(wait.path),
        "config_differences": diffs,
        "shared_traces": shared,
        "base_traces": total,
        "matched": [{**asdict(d), "delta_pp": d.delta_pp} for d in comp.deltas],
        "unmatched": [asdict(u) for u in comp.unmatched],
    }
    store([wait.path, base.path], WAIT, section, results, render=render)
    return comp


def _shared_traces(base: Run, wait: Run) -> tuple[int, int]:
    def traces(run: Run) -> set[str]:
        return {r["trace_id"] for r in run.chain_rows(["trace_id"])}

    a = traces(base)
    return len(a & traces(wait)), len(a)


# ------------------------------------------------------------------------------------------ model swap


def analyze_swap(run_dirs: Sequence[str | Path], target_t: float = 0.3, *, render: bool = True) -> ab.SwapResult:
    """Table 9 from runs made with ``swap_to`` (plus, optionally, plain runs for the diagonal)."""
    runs = [load_ablation_run(p) for p in run_dirs]
    result = ab.swap_cells([(str(r.path), r.rows) for r in runs], target_t)
    if not result.cells:
        present = sorted({float(row["target_t"]) for r in runs for row in r.rows})
        raise ValueError(
            f"no aggregate rows at t={target_t} in {', '.join(str(r.path) for r in runs)}; timesteps present: {present}"
        )
    notes = [
        "Continuing model per run: "
        + "; ".join(f"`{r.path}` → {r.config.swap_to or 'each chain’s own model (no swap_to)'}" for r in runs)
        + "."
    ]
    section = ab.swap_section(result, [str(r.path) for r in runs], notes)
    results = {
        "target_t": result.target_t,
        "runs": [str(r.path) for r in runs],
        "swap_to": {str(r.path): r.config.swap_to for r in runs},
        "cells": [asdict(c) for c in result.cells],
        "duplicates": [asdict(c) for c in result.duplicates],
    }
    store([r.path for r in runs], SWAP, section, results, render=render)
    return result


# --------------------------------------------------------------------------- consecutive interventions


def expand_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories named by ``paths``: a run directory itself, or a folder whose sub-directories are
    runs (e.g. the ``k1`` … ``k5`` written by `run_repeats_sweep`), sorted by name."""
    out: list[Path] = []
    for p in map(Path, paths):
        if is_run_dir(p):
            out.append(p)
            continue
        subs = sorted(d for d in p.iterdir() if is_run_dir(d)) if p.is_dir() else []
        if not subs:
            raise ValueError(f"{p} is neither a run directory (no {MANIFEST}) nor a folder of run directories")
        out.extend(subs)
    return out


def analyze_repeats(run_dirs: Sequence[str | Path], target_t: float = 0.3, *, render: bool = True) -> ab.RepeatsResult:
    """Table 10 from one run per k (k = each run's ``interventions.repeats``); stored in every run."""
    paths = expand_runs(run_dirs)
    runs = [load_ablation_run(p) for p in paths]
    runs.sort(key=lambda r: r.config.interventions.repeats)  # stable: same-k runs keep their given order
    result = ab.repeat_cells(
        [(r.config.interventions.repeats, str(r.path), chain_outcomes(r.run)) for r in runs], target_t
    )
    if not result.cells:
        raise ValueError(f"no graded chains at t={target_t} in {', '.join(str(p) for p in paths)}")
    notes = []
    original = [
        str(r.path) for r in runs if r.config.interventions.repeats > 1 and r.config.interventions.between != "model"
    ]
    if original:
        notes.append(
            "**Note:** " + ", ".join(f"`{p}`" for p in original) + " put the original trace's next step "
            "between interventions (`interventions.between: original`), not model reasoning as in the paper."
        )
    for r in runs[1:]:
        diffs = config_differences(runs[0].config, r.config, (*BOOKKEEPING, "interventions.repeats"))
        if diffs:
            notes.append(
                f"**Warning:** `{r.path}` differs from `{runs[0].path}` in " + ", ".join(f"`{d}`" for d in diffs) + "."
            )
    section = ab.repeats_section(result, [str(r.path) for r in runs], notes)
    results = {
        "target_t": result.target_t,
        "runs": {str(r.path): r.config.interventions.repeats for r in runs},
        "cells": [{**asdict(c), "accuracy": c.accuracy, "majority": c.majority} for c in result.cells],
        "duplicates": [asdict(c) for c in result.duplicates],
    }
    store([r.path for r in runs], REPEATS, section, results, render=render)
    return result


def run_repeats_sweep(
    config: RunConfig,
    ks: Sequence[int] = (1, 2, 3, 4, 5),
    *,
    target_t: float = 0.3,
    make_generator: Callable | None = None,
    progress: bool = True,
    n_boot: int = 2000,
) -> ab.RepeatsResult:
    """Run ``config`` once per k into ``<run_dir>/k<k>`` (resumable, like any run), then `analyze_repeats`."""

    if not ks or any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be integers ≥ 1, got {list(ks)}")
    configs = repeat_configs(config, ks)
    for i, sub in enumerate(configs):
        if i:
            # Every k intervenes on the same original traces: generate them once (the first run), share them.
            copy_originals(configs[0].run_dir, sub.run_dir)
        # No report stage: `analyze_repeats` writes every run's report once, with the ablation section.
        run_pipeline(
            sub,
            stages=[s for s in STAGES if s != "report"],
            make_generator=make_generator,
            progress=progress,
            n_boot=n_boot,
        )
    return analyze_repeats([c.run_dir for c in configs], target_t)


def copy_originals(src: str | Path, dst: str | Path) -> list[str]:
    """Copy the problems, original traces and filter verdicts (tables and clean accuracy) of run ``src`` into
    run ``dst`` (only those ``dst`` lacks), so both intervene on the same traces. Only meaningful when both runs
    have the same dataset, models, traces and filter settings. Returns the names copied."""
    source_run, target_run = open_run(src), open_run(dst)
    dst = target_run.path
    pairs = [(a.path, b.path) for a, b in zip(source_run.tables.selection(), target_run.tables.selection())]
    pairs.append((source_run.file(CLEAN_ACCURACY_FILE), target_run.file(CLEAN_ACCURACY_FILE)))
    copied = []
    for source, target in pairs:
        name = target.name
        if not source.exists() or target.exists():
            continue
        dst.mkdir(parents=True, exist_ok=True)
        tmp = dst / f".{name}.copying"
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tmp)
        tmp.rename(target)  # a killed copy leaves only the hidden temporary, never a partial table
        copied.append(name)
    return copied
