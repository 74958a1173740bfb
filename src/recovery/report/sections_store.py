"""Persist a report `Section` under a run directory and read every stored one back, in report order.

Layout: ``RUN_DIR/analysis/<name>/section.json`` (title, prose, tables, subsections) and the section's
figures as PNG files beside it. Both are written atomically, so a report never reads a half-written
analysis; re-running an analysis replaces its section.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from recovery.report.data import Figure, Section, Table
from recovery.run_dir import ANALYSIS_DIR
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


def save_section(run_dir: str | os.PathLike, name: str, section: Section) -> Path:
    """Store ``section`` as analysis ``name`` of ``run_dir``; returns the JSON file written."""
    out = analysis_dir(run_dir, name)
    payload = {"format": FORMAT_VERSION, "name": name, "section": _section_to_json(section, out, prefix="")}
    path = out / SECTION_FILE
    atomic_write_text(path, json.dumps(payload, indent=1, ensure_ascii=False, default=_json_default))
    return path


def load_section(run_dir: str | os.PathLike, name: str) -> Section | None:
    """The stored section of analysis ``name``, or None when it has not been run."""
    out = analysis_dir(run_dir, name)
    path = out / SECTION_FILE
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        return _section_from_json(payload["section"], out)
    except (OSError, ValueError, KeyError, TypeError) as err:
        # A damaged analysis must not take the whole report down: show what went wrong instead.
        return Section(name, f"_The stored result of analysis `{name}` could not be read ({path}: {err})._")


def load_sections(run_dir: str | os.PathLike) -> list[Section]:
    """Every stored analysis section of ``run_dir``, known analyses first in `REPORT_ORDER`."""
    root = Path(run_dir) / ANALYSIS_DIR
    if not root.is_dir():
        return []
    stored = {p.parent.name for p in root.glob(f"*/{SECTION_FILE}")}
    names = [n for n in REPORT_ORDER if n in stored] + sorted(stored - set(REPORT_ORDER))
    return [s for s in (load_section(run_dir, n) for n in names) if s is not None]


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
