"""The viewer's HTML, rendered on the server: every text from the run is escaped (`html.escape`), the little CSS
there is sits inline, and no script or outside asset is loaded, so the pages work offline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from recovery.report import fmt
from recovery.viewer.cells import RunCells, cell_link
from recovery.viewer.chains import SORTS, ChainPage
from recovery.viewer.detail import ChainView, ContinuationView

CSS = """
body{font:14px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1d1d1f;margin:0;background:#fafafa}
header{background:#24292f;color:#fff;padding:8px 24px}header a{color:#fff;margin-right:18px;text-decoration:none}
main{padding:16px 24px 48px;max-width:1400px}h1{font-size:1.4em;margin:.3em 0}h2{font-size:1.15em;margin-top:1.4em}
table{border-collapse:collapse;font-size:.9em;font-variant-numeric:tabular-nums;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;white-space:nowrap}th{background:#f2f2f2}
td.r{text-align:right}pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #ddd;
padding:8px;max-height:28em;overflow:auto;font-size:.88em}
.inserted{background:#ffe08a;outline:1px solid #d4a300}.removed{background:#ffd6d6;text-decoration:line-through}
.cut{background:#d33;color:#fff;padding:0 4px;border-radius:3px;font-weight:600}
.doubt{background:#cfe3ff;outline:1px solid #6a9fe0}.note{color:#555;font-size:.9em}
.partial{background:#fff3cd;border:1px solid #e0c46c;padding:6px 10px;display:inline-block}
.verdict-correct{color:#1a7f37;font-weight:600}.verdict-wrong,.verdict-no_answer{color:#cf222e;font-weight:600}
.side{display:flex;gap:16px}.side>div{flex:1;min-width:0}form.filters label{margin-right:10px}
.cont{border:1px solid #ddd;background:#fff;margin:10px 0;padding:6px 10px}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{font-weight:600}dd{margin:0}
""".strip()


def page(title: str, body: str, *, compare: bool = False) -> str:
    """A whole page: the header's links, then ``body`` (already HTML)."""
    links = '<a href="/cells">Cells</a><a href="/chains">All chains</a>'
    if compare:
        links += '<a href="/compare">Compare</a>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><header>{links}</header><main>{body}</main></body></html>\n"
    )


def not_found(message: str) -> str:
    return page("Not found", f"<h1>Not found</h1><p id=not-found>{escape(message)}</p>")


def href(path: str, query: Mapping[str, Any] | None = None) -> str:
    """``path?query`` with the query's non-empty values, escaped for an attribute."""
    pairs = {k: v for k, v in (query or {}).items() if v not in (None, "")}
    return escape(path + ("?" + urlencode(pairs) if pairs else ""), quote=True)


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], right: set[int] = frozenset()) -> str:
    """A table whose cells are already HTML."""
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=r' if i in right else ''}>{c}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _partial(note: str) -> str:
    return f'<p class="partial" id="partial">{escape(note)}</p>' if note else ""


# -- index -----------------------------------------------------------------------------------------------------


def cells_page(run_label: str, cells: RunCells, *, compare: bool = False) -> str:
    counts = ", ".join(f"{n:,} {what}" for what, n in cells.counts.items())
    rows = [
        [
            f'<a href="{href("/chains", cell_link(c))}">{escape(c.model)}</a>',
            escape(c.domain),
            f"{escape(c.intervention)} ({escape(c.category)})",
            escape(fmt.timestep(c.t)),
            *(escape(f) for f in c.figures),
        ]
        for c in cells.cells
    ]
    table = _table(
        ["Model", "Domain", "Intervention", "t", *cells.columns], rows, set(range(4, 4 + len(cells.columns)))
    )
    return page(
        f"Cells — {run_label}",
        f"<h1>Cells of {escape(run_label)}</h1>{_partial(cells.partial)}<p class=note>{escape(counts)}. Figures: "
        f"{escape(cells.source)}. Each cell links to its chains.</p>"
        + (table if rows else "<p>No graded chains yet.</p>"),
        compare=compare,
    )


# -- chains ----------------------------------------------------------------------------------------------------


def _select(name: str, values: Sequence[str], chosen: Any) -> str:
    options = "".join(
        f'<option value="{escape(str(v), quote=True)}"{" selected" if str(v) == str(chosen) else ""}>{escape(str(v))}</option>'
        for v in values
    )
    return f'<label>{escape(name)} <select name="{name}"><option value="">any</option>{options}</select></label>'


def filter_form(
    action: str,
    query: Mapping[str, Any],
    choices: Mapping[str, Sequence[str]],
    hidden: Mapping[str, str] = {},
    sorting: bool = True,
) -> str:
    """The filters as a GET form (``hidden``: parameters it keeps as they are; ``sorting``: offer the sort and its
    order): submitting it is a shareable URL."""
    selects = "".join(
        f'<input type="hidden" name="{escape(k, quote=True)}" value="{escape(v, quote=True)}">'
        for k, v in hidden.items()
    )
    selects += "".join(_select(name, values, query.get(name)) for name, values in choices.items())
    search = escape(str(query.get("q") or ""), quote=True)
    return (
        f'<form class="filters" method="get" action="{escape(action, quote=True)}">{selects}'
        f'<label>search <input name="q" value="{search}" placeholder="problem or trace text"></label>'
        + (
            f"{_select('sort', SORTS, query.get('sort'))}{_select('order', ('asc', 'desc'), query.get('order'))}"
            if sorting
            else ""
        )
        + '<button type="submit">Apply</button></form>'
    )


def chains_page(
    title: str, page_: ChainPage, query: Mapping[str, Any], choices: Mapping[str, Sequence[str]], *, compare: bool
) -> str:
    rows = [
        [
            f'<a href="/chain/{quote(r["id"])}">{escape(r["id"])}</a>',
            escape(r["model"]),
            escape(r["intervention"]),
            escape(r["category"]),
            escape(fmt.timestep(r["t"])),
            f'<span class="outcome">{escape(r["outcome"])}</span>',
            f"{r['k']} of {r['n']}",
            escape(fmt.signed(r["whole_pct"])),
            escape(r["problem_id"]),
        ]
        for r in page_.rows
    ]
    table = _table(
        ["Chain", "Model", "Intervention", "Category", "t", "Outcome", "Correct", "Length Δ %", "Problem"], rows
    )
    return page(
        title,
        f"<h1>{escape(title)}</h1>{filter_form('/chains', query, choices)}"
        f"<p class=note id=total>{page_.total:,} chains; page {page_.page} of {page_.pages}</p>"
        f"{table}{_pager('/chains', query, page_)}",
        compare=compare,
    )


def _pager(path: str, query: Mapping[str, Any], p: ChainPage) -> str:
    links = []
    if p.page > 1:
        links.append(f'<a rel="prev" href="{href(path, {**query, "page": p.page - 1})}">previous</a>')
    if p.page < p.pages:
        links.append(f'<a rel="next" href="{href(path, {**query, "page": p.page + 1})}">next</a>')
    return f"<p>{' · '.join(links)}</p>"


# -- one chain -------------------------------------------------------------------------------------------------


def _verdict(verdict: str | None) -> str:
    name = verdict or "ungraded"
    return f'<span class="verdict verdict-{escape(name, quote=True)}">{escape(name)}</span>'


def marked_prefix(view: ChainView) -> str:
    """The kept prefix with the intervention's text marked (``<mark class=inserted>``, each piece where it stands)."""
    edit = view.edit
    return escape(edit.shared_head) + _marked(edit.marks) + escape(edit.shared_tail)


def _marked(marks) -> str:
    return "".join(f'<mark class="inserted">{escape(text)}</mark>' if wrote else escape(text) for wrote, text in marks)


def marked_doubt(c: ContinuationView) -> str:
    """The continuation's text with its doubting units marked (``<mark class=doubt>``), found in order."""
    out, pos = [], 0
    for unit, flag in c.units:
        at = c.text.find(unit, pos)
        if at < 0:
            continue
        if flag:
            out.append(escape(c.text[pos:at]) + f'<mark class="doubt">{escape(unit)}</mark>')
            pos = at + len(unit)
    return "".join(out) + escape(c.text[pos:])


def chain_body(view: ChainView, doubt_detector: str) -> str:
    """One chain's panel (also one side of the compare view)."""
    s, problem = view.summary, view.problem
    facts = {
        "chain": s["id"],
        "model": s["model"],
        "intervention": f"{s['intervention']} ({s['category']})",
        "t": fmt.timestep(s["t"]),
        "outcome": f"{s['outcome']} ({s['k']} of {s['n']} correct)",
        "length Δ % (mean)": fmt.signed(s["whole_pct"]),
        "problem": s["problem_id"],
        "gold answer": problem.answer if problem else "–",
        "original trace's answer": f"{view.trace_answer or '–'} ({view.trace_verdict or 'not graded'})",
    }
    parts = ["<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in facts.items()) + "</dl>"]
    parts.append(f"<h2>Problem</h2><pre>{escape(problem.question if problem else '(not stored)')}</pre>")
    reasoning = view.reasoning
    parts.append(
        "<h2>Original trace, cut marked</h2><pre id=original>"
        + escape(reasoning[: view.cut])
        + '<span class="cut" title="the intervention cuts here">✂ cut</span>'
        + escape(reasoning[view.cut :])
        + "</pre>"
    )
    parts.append(f"<h2>Kept prefix and intervention</h2><pre id=prefix>{marked_prefix(view)}</pre>")
    if view.edit.removed:
        parts.append(
            '<h2>What the intervention replaced</h2><div class="side" id=replaced>'
            f'<div><h3>original</h3><pre><span class="removed">{escape(view.edit.removed)}</span></pre></div>'
            f"<div><h3>replaced by</h3><pre>{_marked(view.edit.marks)}</pre></div></div>"
        )
    parts.append(
        f"<h2>Continuations ({len(view.continuations)})</h2><p class=note>Doubt sentences after the intervention "
        f"marked; detector: {escape(doubt_detector)}.</p>"
    )
    for c in view.continuations:
        doubts = sum(1 for _, flag in c.units if flag)
        parts.append(
            f'<div class="cont" id="continuation-{c.sample_index}"><p>#{c.sample_index} · {_verdict(c.verdict)} · '
            f"answer <code>{escape(c.extracted or '–')}</code> · length Δ {escape(fmt.signed(c.whole_pct))} % · "
            f"{doubts} doubt sentence(s) · finish {escape(c.finish_reason or '–')}</p><pre>{marked_doubt(c)}</pre></div>"
        )
    return "".join(parts)


def chain_page(view: ChainView, doubt_detector: str, *, compare_link: str = "", compare: bool = False) -> str:
    link = f'<p><a id=compare-link href="{escape(compare_link, quote=True)}">compare with the other run</a></p>'
    return page(
        f"Chain {view.summary['id']}",
        f"<h1>Chain {escape(view.summary['id'])}</h1>"
        + (link if compare_link else "")
        + chain_body(view, doubt_detector),
        compare=compare,
    )


def compare_list_page(
    labels: tuple[str, str],
    found: ChainPage,
    query: Mapping[str, Any],
    direction: str,
    counts: Mapping[str, int],
    note: str = "",
    form: str = "",
) -> str:
    tabs = " · ".join(
        f'<a href="{href("/compare", {**query, "direction": d, "page": None})}">{escape(d)} ({counts[d]:,})</a>'
        for d in ("improved", "worsened")
    )
    table = _table(
        ["Chain", "Model", "Intervention", "t", f"Outcome {labels[0]}", f"Outcome {labels[1]}", "Problem"],
        [
            [
                f'<a href="/compare/{quote(r["id"])}">{escape(r["id"])}</a>',
                escape(r["model"]),
                escape(r["intervention"]),
                escape(fmt.timestep(r["t"])),
                escape(f"{r['before']} ({r['k_before']} of {r['n']})"),
                escape(f"{r['after']} ({r['k_after']} of {r['n']})"),
                escape(r["problem_id"]),
            ]
            for r in found.rows
        ],
    )
    return page(
        "Compare",
        f"<h1>Chains whose outcome changed: {escape(labels[0])} → {escape(labels[1])}</h1><p>{tabs}</p>{form}"
        + (f"<p class=partial>{escape(note)}</p>" if note else "")
        + f"<p class=note id=total>{found.total:,} chains {escape(direction)}; page {found.page} of {found.pages}</p>"
        + f"{table}{_pager('/compare', query, found)}",
        compare=True,
    )


def compare_chain_page(labels: tuple[str, str], before: ChainView, after: ChainView, detectors: tuple[str, str]) -> str:
    return page(
        f"Compare {before.summary['id']}",
        f"<h1>Chain {escape(before.summary['id'])}, {escape(labels[0])} and {escape(labels[1])}</h1><div class=side>"
        f"<div id=before><h2>{escape(labels[0])}</h2>{chain_body(before, detectors[0])}</div>"
        f"<div id=after><h2>{escape(labels[1])}</h2>{chain_body(after, detectors[1])}</div></div>",
        compare=True,
    )
