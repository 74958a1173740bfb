"""The run directory's files beside its tables: the manifest (``config.json``, the `RunConfig` the run was
created with), the aggregate stage's ``aggregates.json``, the filter's ``clean_accuracy.json``, the last
invocation's ``summary.json``, the names of the files other modules keep there (``weights.json``,
``servers.json``, ``progress.json``, the lock), and the folders of the report and of stored analyses.

Every file is written atomically (`recovery.store.atomic_write_text`), so a reader sees the old file or
the new one. JSON has no NaN: aggregates store null, and `read_aggregates` gives NaN back.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery.backends.settings import own_settings
from recovery.configs import ConfigError, from_mapping, to_mapping
from recovery.run_config import RunConfig
from recovery.run_dir.lock import LOCK_FILE
from recovery.store import RunDir, atomic_write_text

if TYPE_CHECKING:
    from recovery.metrics import AggregateRow

MANIFEST = "config.json"
AGGREGATES_FILE = "aggregates.json"
CLEAN_ACCURACY_FILE = "clean_accuracy.json"
SUMMARY_FILE = "summary.json"
WEIGHTS_FILE = "weights.json"  # `recovery.run_dir.weights`
SERVERS_FILE = "servers.json"  # `recovery.run_dir.servers`
PROGRESS_FILE = "progress.json"  # `recovery.run_dir.state`
REPORT_DIR = "report"
ANALYSIS_DIR = "analysis"


RESUME = "re-run the same `recovery run` command"
# What makes each file beside the tables again once it is deleted: the remedy when it cannot be read.
_WRITTEN_AGAIN = {
    MANIFEST: f"resume with the run's own config ({RESUME}): it is written again from that config",
    AGGREGATES_FILE: f"resume the run ({RESUME}): the aggregate stage writes it again",
    CLEAN_ACCURACY_FILE: f"resume the run ({RESUME}): the filter stage writes it again",
    SUMMARY_FILE: f"resume the run ({RESUME}): the run writes it again when it ends",
    WEIGHTS_FILE: f"resume the run ({RESUME}): the weights' fingerprints are recorded again",
    SERVERS_FILE: f"resume the run ({RESUME}): the servers' settings are probed and recorded again",
    PROGRESS_FILE: f"resume the run ({RESUME}): it records again whether the run is finished",
    LOCK_FILE: f"resume the run ({RESUME}): the lock file is made again",
}
#: Every file a run directory holds beside its tables (each a file, never a folder).
SIDE_FILES = tuple(_WRITTEN_AGAIN)


def _written_again(path: Path) -> str:
    return _WRITTEN_AGAIN.get(path.name, f"resume the run ({RESUME})")


def read_json_file(path: str | os.PathLike, remedy: str | None = None) -> Any:
    """The JSON value stored in ``path``, or `ConfigError` in one line naming the file, what is wrong with it
    (truncated, empty, not UTF-8, a folder) and ``remedy`` (default: delete it and what writes that
    run-directory file again)."""
    path = Path(path)
    remedy = remedy or f"delete it and {_written_again(path)}"
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except IsADirectoryError:
        raise ConfigError(_folder_in_place(path)) from None
    except UnicodeDecodeError as err:
        problem = f"not UTF-8 text: {err.reason} at byte {err.start}"
    except json.JSONDecodeError as err:
        problem = "empty" if not err.doc.strip() else f"not valid JSON: {err.msg}, line {err.lineno} column {err.colno}"
    raise ConfigError(f"{path}: damaged file ({problem}); {remedy}")


def _folder_in_place(path: Path) -> str:
    return f"{path} is a directory, not a file: remove it and {_written_again(path)}"


def check_side_files(run_dir: str | os.PathLike) -> None:
    """Raise `ConfigError` in one line naming the first of the run's `SIDE_FILES` that is a folder, and what
    to do: a run would fail on it midway (with a traceback), and a reader would take it for a missing file
    (an empty report, a run taken as finished)."""
    for name in SIDE_FILES:
        path = Path(run_dir) / name
        if path.is_dir():
            raise ConfigError(_folder_in_place(path))


def check_run_dir_path(run_dir: str | os.PathLike, *, where: str | None = None) -> None:
    """Raise `ConfigError` in one line when ``run_dir`` cannot be a run directory because it, or a folder
    above it, is a file (rather than an OS error's traceback when the run first writes)."""
    path = Path(run_dir)
    for candidate in (path, *path.parents):
        if candidate.exists() and not candidate.is_dir():
            what = "is a file" if candidate == path else f"is inside {candidate}, which is a file"
            prefix = f"{where}: " if where else ""
            raise ConfigError(f"{prefix}{path} {what}, not a folder; name a folder for the run directory")
        if candidate.is_dir():
            return


def is_run_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a manifest (a folder without one is not a run, whatever tables it holds)."""
    return (Path(path) / MANIFEST).is_file()


# ``traces.filters`` keys added with the paper's selection (issue 29), at their defaults: a run that leaves them
# there writes the manifest it wrote before they existed.
_FILTER_KEYS_ADDED = {"max_per_answer": None, "draw": None, "draw_seed": 0, "reference_solved": None}


def write_manifest(run: RunDir, config: RunConfig) -> None:
    """Store ``config`` as the run's manifest."""
    mapping = to_mapping(config)
    if config.default_protocol:
        # The project's own protocol is what every run before the switch followed: its manifest stays as it
        # was, byte for byte (read back, the missing keys take their defaults).
        del mapping["protocol"], mapping["protocol_parts"]
    filters = mapping.get("traces", {}).get("filters", {})
    for key, default in _FILTER_KEYS_ADDED.items():  # left out at their defaults, as the protocol keys
        if key in filters and filters[key] == default:
            del filters[key]
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.file(MANIFEST), json.dumps(mapping, indent=2, sort_keys=True, default=str))


def read_manifest(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest as written (a plain mapping, for readers that describe or hash it as stored, also when
    the current `RunConfig` can no longer read it). Raises `ConfigError` when there is none."""
    path = Path(run_dir) / MANIFEST
    check_side_files(run_dir)  # a folder in place of one: named, not "no config.json" or a missing file
    if not path.is_file():
        check_run_dir_path(run_dir)
        raise ConfigError(f"{run_dir} is not a run directory (no {MANIFEST})")
    manifest = read_json_file(path)
    if not isinstance(manifest, dict):
        raise ConfigError(f"{path}: damaged file (not a JSON object); delete it and {_WRITTEN_AGAIN[MANIFEST]}")
    return manifest


def run_config_from_manifest(manifest: Mapping[str, Any], *, where: str = MANIFEST) -> RunConfig:
    """The `RunConfig` of a manifest mapping, read through the dataclasses, so fields added since the run was
    created take their defaults."""
    return from_mapping(RunConfig, _without_other_backends_keys(manifest), where=where)


def _without_other_backends_keys(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest without the settings keys of backends other than each model's own: before backends owned
    their settings every model config held them all, and any value of one its backend never read (an old
    ``batch_size`` of a vLLM model) means nothing."""

    out = dict(manifest)
    if isinstance(out.get("models"), list):
        out["models"] = [own_settings(m) for m in out["models"]]
    for section, key in (("interventions", "llm"), ("grading", "judge")):
        if isinstance(out.get(section), Mapping) and out[section].get(key) is not None:
            out[section] = {**out[section], key: own_settings(out[section][key])}
    return out


def write_aggregates(run: RunDir, rows: Iterable[AggregateRow]) -> None:
    """Store the aggregate rows (`recovery.metrics.AggregateRow.flat`), NaN as null."""
    flat = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.flat().items()} for r in rows]
    atomic_write_text(run.file(AGGREGATES_FILE), json.dumps(flat, indent=1, sort_keys=True))


def read_aggregates(run: RunDir) -> list[dict[str, Any]]:
    """The flat aggregate rows written by `write_aggregates` (NaN restored from null); empty before the
    aggregate stage ran."""
    path = run.file(AGGREGATES_FILE)
    if not path.is_file():
        return []
    return [{k: (math.nan if v is None else v) for k, v in row.items()} for row in read_json_file(path)]


def write_clean_accuracy(run: RunDir, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store the clean accuracy per (model, domain): rows with ``model``, ``domain``, ``n``, ``accuracy``."""
    atomic_write_text(run.file(CLEAN_ACCURACY_FILE), json.dumps(list(rows), indent=2))


def read_clean_accuracy(run: RunDir) -> list[dict[str, Any]]:
    """The rows written by `write_clean_accuracy`; empty before the filter stage ran."""
    path = run.file(CLEAN_ACCURACY_FILE)
    return read_json_file(path) if path.is_file() else []


def write_summary(run: RunDir, summary: Mapping[str, Any]) -> None:
    """Store what the last invocation did (`recovery.pipeline.RunSummary` as a mapping)."""
    atomic_write_text(run.file(SUMMARY_FILE), json.dumps(dict(summary), indent=2, sort_keys=True))
