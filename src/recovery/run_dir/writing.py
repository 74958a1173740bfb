"""The one door through which a run directory is written (`writing`), and the manifest's rule for resuming
(`check_resumable`).

An invocation that writes a run holds the directory's writer lock for its whole life; records the config as
the manifest of a new run, or refuses one that would change an existing run's results; removes what a
killed writer left half-written; marks the run unfinished while it adds rows; and, when its body ends, stores
its summary and marks the run finished. A body that raises (a kill, an error) leaves the run unfinished,
with every committed shard kept, to be resumed.

Which fields may change on resume is declared on the config dataclasses (`recovery.configs.results_neutral`)
and, for a backend's settings, on its settings class (`recovery.backends.settings.setting`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from recovery.backends.settings import own_settings
from recovery.configs import ConfigError, results_neutral_keys, to_mapping
from recovery.plan import resolved_config
from recovery.run_config import GradingConfig, RunConfig
from recovery.run_dir.files import is_run_dir, write_manifest, write_summary
from recovery.run_dir.lock import exclusive_writer
from recovery.run_dir.run import Run, open_run
from recovery.run_dir.state import mark_finished, mark_writing

__all__ = ["RunWriting", "check_resumable", "writing"]

_RESUMABLE_KEYS = results_neutral_keys(RunConfig)
_RESUMABLE_GRADING_KEYS = results_neutral_keys(GradingConfig)


def _results_part(mapping: dict[str, Any]) -> dict[str, Any]:
    """The part of a config mapping that can change a run's results: without the fields declared results
    neutral, and each model with only its backend's settings that change results."""

    def model(m: Any) -> Any:
        return own_settings(m, results_only=True)

    out = {k: v for k, v in mapping.items() if k not in _RESUMABLE_KEYS}
    out["models"] = [model(m) for m in out.get("models", [])]
    if isinstance(out.get("interventions"), dict):
        out["interventions"] = {**out["interventions"], "llm": model(out["interventions"].get("llm"))}
    if isinstance(out.get("grading"), dict):
        grading = {k: v for k, v in out["grading"].items() if k not in _RESUMABLE_GRADING_KEYS}
        out["grading"] = {**grading, "judge": model(grading.get("judge"))}
    return out


def check_resumable(config: RunConfig) -> None:
    """Raise `ConfigError` when ``config.run_dir`` holds a run created with a config that would change its
    results; a directory with no run passes. Writes nothing, so a caller about to start several runs can
    check them all before any work."""
    if not is_run_dir(config.run_dir):
        return
    current = _results_part(to_mapping(resolved_config(config)))
    # The stored config is read back through the dataclasses, so fields added since the run was created
    # compare at their defaults instead of looking like a change; both sides resolved (`recovery.plan`).
    stored = _results_part(to_mapping(resolved_config(open_run(config.run_dir).config)))
    if stored != current:
        changed = sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))
        raise ConfigError(
            f"{config.run_dir} was created with a different config (changed: {', '.join(changed)}); "
            "use a new run_dir or restore the original config to resume"
        )


@dataclass
class RunWriting:
    """The run being written (``run``) and what the invocation will leave as its summary (set ``summary``
    before the body ends; none is written when it stays None)."""

    run: Run
    summary: Mapping[str, Any] | None = None


@contextmanager
def writing(config: RunConfig, *, adds_rows: bool, checks: Callable[[Run], None] | None = None) -> Iterator[RunWriting]:
    """Write the run of ``config`` (see the module doc). ``checks(run)`` runs under the lock, once the manifest
    is settled and before anything is written to the tables or the marks: what else must match (the weights,
    the servers) fails there and leaves the run as it was. ``adds_rows``: whether the invocation may add rows
    (one that only aggregates or reports leaves the run's finished mark as it was)."""
    with exclusive_writer(config.run_dir):
        run = open_run(config.run_dir)
        check_resumable(config)
        if not is_run_dir(run.path):
            write_manifest(run, config)
        if checks is not None:
            checks(run)
        run.clean_stale()
        if adds_rows:
            mark_writing(run)  # until this invocation ends: analyses and exports refuse the run, or call theirs partial
        writing = RunWriting(run)
        yield writing  # a body that raises leaves the run unfinished
        if writing.summary is not None:
            write_summary(run, writing.summary)
        if adds_rows:
            mark_finished(run)
