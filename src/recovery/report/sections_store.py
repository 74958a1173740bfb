"""Persist a report `Section` under a run directory and read every stored one back, in report order.

Layout: ``RUN_DIR/analysis/<name>/section.json`` (title, prose, tables, subsections) and the section's
figures as PNG files beside it. Both are written atomically, so a report never reads a half-written
analysis; re-running an analysis replaces its section. A section stored with ``data`` (what it was computed
on: `recovery.run_dir.state.RunState.record`) is read back with a note when that was partial, or when it
differs from the run's data now (``current``): a report never shows such a section as final.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recovery.report.data import Figure, Section, Table
from recovery.run_dir import ANALYSIS_DIR, is_run_dir
from recovery.run_dir.state import require_finished
from recovery.store import atomic_write_bytes, atomic_write_text

SECTION_FILE = "section.json"
FORMAT_VERSION = 1
# Report order of the known analyses; any other stored analysis follows, sorted by name.
REPORT_ORDER: tuple[str, ...] = (
    "doubt",
    "doubt_validation",
    "ablation_wait",
    "ablation_swap",
    "ablation_repeats",
    "bbm",
    "paraphrase",
    "probes",
    "doubt_clusters",
)


def analysis_dir(run_dir: str | os.PathLike, name: str) -> Path:
    """``RUN_DIR/analysis/<name>``: where analysis ``name`` keeps its results and its section."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"analysis name {name!r} must be a plain folder name")
    return Path(run_dir) / ANALYSIS_DIR / name


def save_section(run_dir: str | os.PathLike, name: str, section: Section, *, partial: bool | None = None) -> Path:
    """Store ``section`` as analysis ``name`` of ``run_dir`` with what it was computed on; returns the JSON
    file written. A run that is not finished is refused (`recovery.run_dir.state.require_finished`: one line)
    unless a partial result was asked for (``partial``; None: the command's ``--partial``)."""
    out = analysis_dir(run_dir, name)
    data = require_finished(run_dir, f"analysis {name}", partial=partial).record() if is_run_dir(run_dir) else None
    payload = {"format": FORMAT_VERSION, "name": name, "section": _section_to_json(section, out, prefix="")}
    if data is not None:
        payload["data"] = data
    path = out / SECTION_FILE
    atomic_write_text(path, json.dumps(payload, indent=1, ensure_ascii=False, default=_json_default))
    return path


def load_section(run_dir: str | os.PathLike, name: str, current: Mapping[str, Any] | None = None) -> Section | None:
    """The stored section of analysis ``name``, or None when it has not been run; with a note first when it
    was computed on partial data, or on other data than ``current`` (the run's now)."""
    out = analysis_dir(run_dir, name)
    path = out / SECTION_FILE
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        section = _section_from_json(payload["section"], out)
        note = data_note(name, payload.get("data"), current)
        return dataclasses.replace(section, markdown=f"{note}\n\n{section.markdown}") if note else section
    except (OSError, ValueError, KeyError, TypeError) as err:
        # A damaged analysis must not take the whole report down: show what went wrong instead.
        return Section(name, f"_The stored result of analysis `{name}` could not be read ({path}: {err})._")


def data_note(name: str, stored: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> str:
    """The note a section computed on ``stored`` data gets in a report of ``current`` data (empty: none)."""
    if not stored:
        return ""
    then = f"{stored.get('graded', 0):,} of {stored.get('expected', 0):,} continuations graded"
    rerun = f"re-run `recovery analyze` ({name}) on the finished run"
    if not stored.get("complete", True):
        return f"_**Partial:** computed on {then}, while the run was not finished; {rerun}._"
    if current is not None and (stored.get("graded"), stored.get("expected")) != (
        current.get("graded"),
        current.get("expected"),
    ):
        now = f"{current.get('graded', 0):,} of {current.get('expected', 0):,}"
        return f"_**Computed on other data than this report's:** {then} then, {now} now; {rerun}._"
    return ""


def load_sections(run_dir: str | os.PathLike, current: Mapping[str, Any] | None = None) -> list[Section]:
    """Every stored analysis section of ``run_dir``, known analyses first in `REPORT_ORDER`, each with a note
    when computed on partial data or on other data than ``current``."""
    root = Path(run_dir) / ANALYSIS_DIR
    if not root.is_dir():
        return []
    stored = {p.parent.name for p in root.glob(f"*/{SECTION_FILE}")}
    names = [n for n in REPORT_ORDER if n in stored] + sorted(stored - set(REPORT_ORDER))
    return [s for s in (load_section(run_dir, n, current) for n in names) if s is not None]


def _json_default(value: Any) -> Any:
    # numpy scalars and other number-likes in table cells.
    for kind in (int, float):
        try:
            return kind(value)
        except (TypeError, ValueError):
            continue
    return str(value)


def _section_to_json(section: Section, out: Path, prefix: str) -> dict[str, Any]:
    figures = []
    for fig in section.figures:
        file = f"{prefix}{fig.name}.png"
        atomic_write_bytes(out / file, fig.png_bytes)
        figures.append({"name": fig.name, "caption": fig.caption, "file": file})
    tables: list[Any] = []
    for table in section.tables:
        if isinstance(table, str):
            tables.append({"markdown": table})
        else:
            tables.append(
                {
                    "title": table.title,
                    "columns": list(table.columns),
                    "rows": [list(r) for r in table.rows],
                    "align": list(table.align) if table.align is not None else None,
                    "caption": table.caption,
                    "collapsed": table.collapsed,
                }
            )
    subs = [_section_to_json(s, out, prefix=f"{prefix}{i}-") for i, s in enumerate(section.subsections)]
    return {
        "title": section.title,
        "markdown": section.markdown,
        "figures": figures,
        "tables": tables,
        "subsections": subs,
    }


def _section_from_json(obj: dict[str, Any], out: Path) -> Section:
    figures = tuple(
        Figure(f["name"], (out / f["file"]).read_bytes(), f.get("caption", "")) for f in obj.get("figures", [])
    )
    tables: list[Table | str] = []
    for t in obj.get("tables", []):
        if "markdown" in t:
            tables.append(t["markdown"])
        else:
            tables.append(
                Table(
                    t["title"],
                    t["columns"],
                    [tuple(r) for r in t["rows"]],
                    t.get("align"),
                    t.get("caption", ""),
                    bool(t.get("collapsed", False)),
                )
            )
    subs = tuple(_section_from_json(s, out) for s in obj.get("subsections", []))
    return Section(obj["title"], obj.get("markdown", ""), figures, tuple(tables), subs)
