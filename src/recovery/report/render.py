"""Turn `ReportData` into ``report.md``, ``report.html`` and ``figures/*.png``.

`render_report` does everything in memory (the training callback can log the PNGs or the HTML without
touching disk); `write_report` writes the result atomically, figures first so that a reader of a new
``report.md`` never finds a figure missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from recovery.report.data import Figure, ReportData, Section
from recovery.report.html import render_html
from recovery.report.sections import standard_sections
from recovery.report.tables import to_markdown
from recovery.store import atomic_write_bytes, atomic_write_text

FIGURES_DIR = "figures"


@dataclass(frozen=True)
class RenderedReport:
    """A report in memory: Markdown and HTML text and the PNG bytes of each figure by file name."""

    markdown: str
    html: str
    figures: dict[str, bytes]
    sections: tuple[Section, ...]


@dataclass(frozen=True)
class ReportPaths:
    """Where `write_report` put things."""

    out_dir: Path
    markdown: Path
    html: Path
    figures: tuple[Path, ...]


def render_report(data: ReportData) -> RenderedReport:
    """Build the standard sections (unless ``data.standard`` is off), append ``data.sections``, render both."""
    sections = [*(standard_sections(data) if data.standard else []), *data.sections]
    sections = _unique_figure_names(sections)
    figures = {f"{f.name}.png": f.png_bytes for f in _all_figures(sections)}
    return RenderedReport(
        markdown=render_markdown(data.title, sections),
        html=render_html(data.title, sections),
        figures=figures,
        sections=tuple(sections),
    )


def write_report(data: ReportData, out_dir: str | os.PathLike) -> ReportPaths:
    """Write ``report.md``, ``report.html`` (self-contained) and ``figures/*.png`` under ``out_dir``.

    Every file is replaced atomically. PNGs in ``figures/`` that this report no longer produces (from an
    earlier render with other domains, say) are removed so the folder matches the report.
    """
    out = Path(out_dir)
    rendered = render_report(data)
    fig_dir = out / FIGURES_DIR
    paths = []
    for name, png in rendered.figures.items():
        atomic_write_bytes(fig_dir / name, png)
        paths.append(fig_dir / name)
    if fig_dir.is_dir():
        for stale in fig_dir.glob("*.png"):
            if stale.name not in rendered.figures:
                stale.unlink(missing_ok=True)
    atomic_write_text(out / "report.md", rendered.markdown)
    atomic_write_text(out / "report.html", rendered.html)
    return ReportPaths(out, out / "report.md", out / "report.html", tuple(paths))


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    """Markdown for ``sections``; figures are linked as ``figures/<name>.png`` relative to the report."""
    parts = [f"# {title}"]
    for section in sections:
        parts.append(_section_md(section, 2))
    return "\n\n".join(parts).rstrip() + "\n"


def _section_md(section: Section, level: int) -> str:
    parts = [f"{'#' * min(level, 6)} {section.title}"]
    if section.markdown:
        parts.append(section.markdown.strip())
    for fig in section.figures:
        image = f"![{_alt(fig.name)}]({FIGURES_DIR}/{fig.name}.png)"
        parts.append(f"{image}\n\n*Figure: {fig.caption}*" if fig.caption else image)
    parts += [t.strip() if isinstance(t, str) else to_markdown(t) for t in section.tables]
    parts += [_section_md(sub, level + 1) for sub in section.subsections]
    return "\n\n".join(parts)


def _alt(text: str) -> str:
    # Brackets would end the image's alt text early.
    return text.replace("[", "(").replace("]", ")").replace("\n", " ")


# ------------------------------------------------------------------------------------------- figure names


def _slug(name: str) -> str:
    stem = name[:-4] if name.lower().endswith(".png") else name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "figure"


def _unique_figure_names(sections: Sequence[Section]) -> list[Section]:
    """Rename figures to file-safe, unique stems (``x``, ``x-2``, …) in document order."""
    used: set[str] = set()

    def fix(section: Section) -> Section:
        figs = []
        for fig in section.figures:
            base = _slug(fig.name)
            name, i = base, 2
            while name in used:
                name, i = f"{base}-{i}", i + 1
            used.add(name)
            figs.append(replace(fig, name=name) if name != fig.name else fig)
        subs = [fix(s) for s in section.subsections]
        return replace(section, figures=tuple(figs), subsections=tuple(subs))

    return [fix(s) for s in sections]


def _all_figures(sections: Sequence[Section]) -> list[Figure]:
    out: list[Figure] = []
    for s in sections:
        out += list(s.figures)
        out += _all_figures(s.subsections)
    return out
