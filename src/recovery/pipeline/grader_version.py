"""Which version of the rule grader made a run's grades, and bringing old grades up to date.

A run records the grader version (`recovery.grading.GRADER_VERSION`) beside its grades (``grades/grader.json``).
When the grader's rules change, a run graded before the change re-grades its stored continuations the next
time its grades are written (`recovery run`, `recovery grades`): nothing is generated again, and the
figures follow the grades (the aggregate and report stages read them). Grades stored before versions were
recorded count as version 1.
"""

from __future__ import annotations

import json
import os
import shutil

from recovery.grading import GRADER_VERSION
from recovery.run_dir import Run
from recovery.store import atomic_write_text

__all__ = ["GRADER_FILE", "UNRECORDED", "bring_grades_up_to_date", "stored_grader_version"]

#: The file in the grades table's folder naming the grader version that made its rows.
GRADER_FILE = "grader.json"
#: The version of grades stored before runs recorded one.
UNRECORDED = 1


def stored_grader_version(run: Run) -> int | None:
    """The grader version of ``run``'s stored grades; None when it has none."""
    table = run.tables.grades
    path = table.path / GRADER_FILE
    if path.is_file():
        return int(json.loads(path.read_text())["grader_version"])
    return UNRECORDED if table.exists() else None


def bring_grades_up_to_date(run: Run) -> str | None:
    """Make ``run``'s grades the current grader's: grades of another version are set aside (their folder
    removed in one rename, so a kill leaves either the old grades or none) to be graded again from the stored
    continuations, and the current version is recorded. Returns a line saying what was set aside, or None."""
    table = run.tables.grades
    stored = stored_grader_version(run)
    said = None
    if stored is not None and stored != GRADER_VERSION:
        rows = table.count()
        aside = table.path.with_name(f".{table.path.name}-grader-{stored}-{os.getpid()}")
        os.replace(table.path, aside)
        shutil.rmtree(aside)
        said = (
            f"grades: {rows:,} grades were made by grader version {stored}; this is version {GRADER_VERSION}: "
            "re-grading the stored continuations (nothing is generated again)"
        )
    table.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(table.path / GRADER_FILE, json.dumps({"grader_version": GRADER_VERSION}) + "\n")
    return said
