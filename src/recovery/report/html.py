"""A self-contained HTML page: inline CSS, figures as base64 ``data:`` URIs, no scripts, no external assets.

It opens offline, can be mailed or attached to an experiment tracker as one file, and is byte-for-byte
deterministic for the same sections.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

import recovery.report.fmt as fmt
from recovery.report.data import Figure, Section, Table
from recovery.report.figures import CATEGORY_COLORS, EMBED_WIDTH_PX

# The content column (main's content box) is EMBED_WIDTH_PX wide at most: the figures are sized for that width,
# so their text keeps its size on screen. Tables wider than the column scroll inside their .table-wrap.
_CSS = """
body{font:15px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1d1d1f;margin:0;background:#fafafa}
main{max-width:MAIN_WIDTHpx;margin:0 auto;padding:24px 32px 64px;background:#fff}
h1{font-size:1.7em;margin:.2em 0 .4em}h2{font-size:1.35em;margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.1em;margin-top:1.6em}
nav ol{columns:2;font-size:.92em}
figure{margin:1.2em 0;text-align:center}figure img{max-width:100%;height:auto;box-shadow:0 0 0 1px #eee}
figcaption{font-size:.88em;color:#555;max-width:900px;margin:.4em auto 0}
.table-wrap{overflow-x:auto;max-width:100%;margin:.8em 0 1.4em}.table-wrap>table{margin:0}
table{border-collapse:collapse;font-size:.85em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:3px 8px;white-space:nowrap}th{background:#f2f2f2}
td.r,th.r{text-align:right}td.l,th.l{text-align:left}tr:nth-child(even) td{background:#fbfbfb}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}
.note{font-size:.85em;color:#555;margin-top:.3em}
details summary{cursor:pointer;font-weight:600;margin:.6em 0}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border-radius:3px;color:#fff;font-size:.85em}
code{background:#f3f3f3;padding:0 3px;border-radius:3px}
""".strip().replace("MAIN_WIDTH", str(EMBED_WIDTH_PX))


def render_html(title: str, sections: Sequence[Section]) -> str:
    """The whole page for ``sections`` (figure names must already be unique; `render_report` sees to it)."""
    anchors = _Anchors()
    body = [f"<h1>{html.escape(title)}</h1>", _legend()]
    toc = []
    for section in sections:
        anchor = anchors.make(section.title)
        toc.append(f'<li><a href="#{anchor}">{html.escape(section.title)}</a></li>')
        body.append(_section(section, anchor, 2, anchors))
    body.insert(2, f"<nav><ol>{''.join(toc)}</ol></nav>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="recovery.report">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n"
        f"<body>\n<main>\n{chr(10).join(body)}\n</main>\n</body>\n</html>\n"
    )


def _legend() -> str:
    chips = "".join(
        f'<span style="background:{color}">{name}</span>' for name, color in CATEGORY_COLORS.items() if name != "other"
    )
    return f'<p class="legend">Intervention categories: {chips}</p>'


def _section(section: Section, anchor: str, level: int, anchors: _Anchors) -> str:
    h = min(level, 6)
    parts = [f'<section id="{anchor}">', f"<h{h}>{html.escape(section.title)}</h{h}>"]
    if section.markdown:
        parts.append(markdown_to_html(section.markdown))
    parts += [figure_html(f) for f in section.figures]
    parts += [markdown_to_html(t) if isinstance(t, str) else table_html(t) for t in section.tables]
    for sub in section.subsections:
        parts.append(_section(sub, anchors.make(sub.title), level + 1, anchors))
    parts.append("</section>")
    return "\n".join(parts)


def figure_html(figure: Figure) -> str:
    """An ``<img>`` with the PNG inlined as a base64 data URI, and its caption."""
    data = base64.b64encode(figure.png_bytes).decode("ascii")
    alt = html.escape(figure.caption or figure.name, quote=True)
    cap = f"<figcaption>{html.escape(figure.caption)}</figcaption>" if figure.caption else ""
    return f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">{cap}</figure>'


def table_html(table: Table) -> str:
    """A ``<table>``; long tables (``collapsed``) fold into a ``<details>`` element.

    The table sits in a ``.table-wrap`` that scrolls sideways when the table is wider than the page, so wide
    tables (one column per intervention) are not cut at the content edge; the note stays below the scroller.
    """
    align = table.align or "l" * len(table.columns)
    if not table.rows:
        inner = f'<p><strong>{html.escape(table.title)}</strong></p><p class="note">No rows.</p>'
        return inner
    head = "".join(f'<th class="{a}">{html.escape(str(c))}</th>' for c, a in zip(table.columns, align))
    links = table.links or [None] * len(table.rows)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{a}">{_linked(html.escape(fmt.cell(v)), link if i == 0 else None)}</td>'
            for i, (v, a) in enumerate(zip(row, align))
        )
        + "</tr>"
        for row, link in zip(table.rows, links)
    )
    note = f'<p class="note">{html.escape(table.caption)}</p>' if table.caption else ""
    if table.collapsed:
        return (
            f"<details><summary>{html.escape(table.title)} ({len(table.rows)} rows)</summary>"
            f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
            f"{note}</details>"
        )
    return (
        f'<div class="table-wrap"><table><caption>{html.escape(table.title)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}"
    )


def _linked(cell: str, url: str | None) -> str:
    """``cell`` (already HTML) as a link to ``url`` when there is one."""
    return f'<a href="{html.escape(url, quote=True)}">{cell}</a>' if url else cell


def markdown_to_html(text: str) -> str:
    """Section prose to HTML with markdown-it (a dependency of rich); raw HTML in the text is escaped.

    Pipe tables (in prose or in a section's Markdown table strings) scroll sideways like `table_html`'s.
    """
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # keep the page valid even without it: escaped paragraphs
        paras = [p.strip() for p in text.split("\n\n") if p.strip()]
        return "\n".join(f"<p>{html.escape(p)}</p>" for p in paras)
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(text).strip()
    return _wrap_tables(rendered)


def _wrap_tables(rendered: str) -> str:
    # Markdown pipe tables get the same horizontal scroller as `table_html`'s. Raw HTML in the source is escaped
    # (html=False), so every literal "<table>" here is one markdown-it made.
    return rendered.replace("<table>", '<div class="table-wrap"><table>').replace("</table>", "</table></div>")


class _Anchors:
    """Unique, readable ids for headings (``majority-robustness-math``, then ``…-2`` on a clash)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def make(self, title: str) -> str:
        base = "".join(ch if ch.isalnum() else "-" for ch in title.lower())
        base = "-".join(p for p in base.split("-") if p) or "section"
        anchor, i = base, 2
        while anchor in self.used:
            anchor, i = f"{base}-{i}", i + 1
        self.used.add(anchor)
        return anchor
