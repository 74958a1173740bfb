"""Whether a run is finished, and what a result computed from it was computed on.

A run is *being written* while another process holds its writer lock (`recovery.run_dir.lock`), and *not
finished* while ``progress.json`` says so: `recovery.pipeline.run` marks the run unfinished before an
invocation that adds rows and finished when that invocation has run its stages to the end (a run killed
in between stays unfinished until a resume ends). A run without the file
(written before it existed, or built by hand) is taken as finished: nothing says otherwise.

Analyses and exports read a run; on an unfinished one they refuse (`require_finished`), unless the user asked
for a partial result (``--partial``, held for the command in `partial_allowed`): then they say "partial: N
of M" wherever the result appears. `RunState.record` is what a stored result keeps of the data it was computed
on, so a report rewritten later can tell a section computed on other data than its own.
"""

from __future__ import annotations

import contextvars
import json
import os
from dataclasses import dataclass
from typing import Any

from recovery.configs import ConfigError
from recovery.run_dir.files import PROGRESS_FILE
from recovery.run_dir.lock import holder_of
from recovery.run_dir.run import open_run
from recovery.store import RunDir, atomic_write_text

#: Whether the command running now was asked for a partial result (``--partial``).
partial_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar("partial_allowed", default=False)


def mark_writing(run: str | os.PathLike | RunDir) -> None:
    """Record that ``run`` is being added to: it is not finished until `mark_finished`."""
    atomic_write_text(open_run(run).file(PROGRESS_FILE), json.dumps({"finished": False}))


def mark_finished(run: str | os.PathLike | RunDir) -> None:
    """Record that the invocation writing ``run`` has run its stages to the end."""
    atomic_write_text(open_run(run).file(PROGRESS_FILE), json.dumps({"finished": True}))


def recorded_finished(run: RunDir) -> bool | None:
    """What ``progress.json`` says (None: no such file, or one that cannot be read)."""
    try:
        return bool(json.loads(run.file(PROGRESS_FILE).read_text())["finished"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class RunState:
    """Where a run stands: ``writer`` (the process writing it, in words; empty when none), ``finished`` (what
    the run records; None when it records nothing), ``graded`` continuations and the ``expected`` ones
    (chains × the continuations per chain)."""

    writer: str
    finished: bool | None
    graded: int
    expected: int

    @property
    def complete(self) -> bool:
        return not self.writer and self.finished is not False

    def why(self) -> str:
        """Why the run is not complete, in words."""
        if self.writer:
            return f"it is being written ({self.writer})"
        return "it has not finished (progress.json: finished false; resume the run to finish it)"

    def partial_note(self) -> str:
        """``partial: N of M graded continuations`` and why."""
        return f"partial: {self.graded:,} of {self.expected:,} continuations graded; {self.why()}"

    def record(self) -> dict[str, Any]:
        """What a result computed now keeps of the data it was computed on."""
        return {"graded": self.graded, "expected": self.expected, "complete": self.complete}


def run_state(run_dir: str | os.PathLike | RunDir) -> RunState:
    """The state of the run in ``run_dir`` (see `RunState`)."""
    run = open_run(run_dir)
    n = run.config.continuation.n
    return RunState(
        writer=holder_of(run.path, other=True),
        finished=recorded_finished(run),
        graded=run.tables.grades.count(),
        expected=run.tables.chains.count() * n,
    )


def require_finished(run_dir: str | os.PathLike | RunDir, what: str, *, partial: bool | None = None) -> RunState:
    """The run's state; `ConfigError` in one line when it is not complete and a partial result was not asked
    for (``partial``; None: `partial_allowed`)."""
    state = run_state(run_dir)
    allowed = partial_allowed.get() if partial is None else partial
    if not state.complete and not allowed:
        path = open_run(run_dir).path
        raise ConfigError(
            f"{what}: {path} is not finished: {state.why()}; {state.graded:,} of {state.expected:,} "
            "continuations are graded. Wait for the run to finish, or pass --partial for a result marked partial"
        )
    return state


__all__ = [
    "PROGRESS_FILE",
    "RunState",
    "mark_finished",
    "mark_writing",
    "partial_allowed",
    "recorded_finished",
    "require_finished",
    "run_state",
]
