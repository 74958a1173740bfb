"""Writing the report: files, self-contained HTML, valid and deterministic PNGs, empty input, extra sections."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import subprocess
import sys

import pytest
from PIL import Image

from recovery.report import Figure, ReportData, Section, Table, render_report, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def written(tmp_path_factory, small_rows):
    data = ReportData.from_dicts(
        small_rows,
        clean=[{"model": "m1", "domain": "math", "n": 100, "accuracy": 0.95}],
        skips=[{"stage": "filter", "reason": "no_close_tag", "count": 3}],
        meta={"models": ["m1", "m2"], "seed": 0},
    )
    return data, write_report(data, tmp_path_factory.mktemp("report"))


def _assert_png(data: bytes) -> None:
    assert data.startswith(PNG_MAGIC)
    image = Image.open(io.BytesIO(data))
    image.verify()
    assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100


def test_files_and_figures(written):
    _, paths = written
    assert paths.markdown.is_file() and paths.html.is_file()
    names = sorted(p.name for p in paths.figures)
    assert names == ["length_math.png", "levels_math.png", "majority_math.png"]
    for p in paths.figures:
        _assert_png(p.read_bytes())
    md = paths.markdown.read_text("utf-8")
    linked = re.findall(r"\]\((figures/[^)]+\.png)\)", md)
    assert sorted(linked) == sorted(f"figures/{n}" for n in names)
    assert all((paths.out_dir / link).is_file() for link in linked)
    assert not list(paths.out_dir.rglob("*.tmp"))  # atomic writes leave no temporaries


def test_html_is_self_contained(written):
    _, paths = written
    page = paths.html.read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert 'src="http' not in page and "<link" not in page and "<script" not in page and "url(" not in page
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == len(paths.figures) and all(s.startswith("data:image/png;base64,") for s in srcs)
    embedded = {base64.b64decode(s.split(",", 1)[1]) for s in srcs}
    assert embedded == {p.read_bytes() for p in paths.figures}
    # The same cells as the Markdown, HTML-escaped.
    assert '<td class="r">0.932 ± 0.251</td>' in page
    assert "<style>" in page and ">nan<" not in page.lower()


def test_same_input_same_bytes(written, tmp_path):
    data, paths = written
    again = write_report(data, tmp_path)
    for a, b in [(paths.markdown, again.markdown), (paths.html, again.html), *zip(paths.figures, again.figures)]:
        assert a.read_bytes() == b.read_bytes(), a.name


def test_same_bytes_in_another_process(written, tmp_path):
    """Hash seeds and matplotlib state of a fresh interpreter must not change a byte."""
    data, paths = written
    source = tmp_path / "data.json"
    source.write_text(json.dumps(data.to_dict()))  # NaN survives as the JSON extension Python reads back
    script = (
        "import hashlib, json, sys; from recovery.report import ReportData, render_report;"
        "r = render_report(ReportData.from_dict(json.load(open(sys.argv[1]))));"
        "print(json.dumps({'html': hashlib.sha256(r.html.encode()).hexdigest(),"
        " **{k: hashlib.sha256(v).hexdigest() for k, v in r.figures.items()}}))"
    )
    env = {"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(source)], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    hashes = json.loads(done.stdout)
    assert hashes["html"] == hashlib.sha256(paths.html.read_bytes()).hexdigest()
    for p in paths.figures:
        assert hashes[p.name] == hashlib.sha256(p.read_bytes()).hexdigest(), p.name


def test_empty_input_is_a_note_not_a_crash(tmp_path):
    paths = write_report(ReportData.from_dicts(), tmp_path)
    md = paths.markdown.read_text("utf-8")
    assert "No aggregate rows" in md and "No clean (un-intervened) accuracy" in md and "No skip summary" in md
    assert paths.figures == () and "data:image" not in paths.html.read_text("utf-8")
    assert "No item was skipped." in render_report(ReportData.from_dicts(skips=[])).markdown


def test_lengths_not_measured_and_nan_cells(tmp_path, make_row):
    rows = [make_row("m", "logic", "paraphrase", 0.3, 5, (math.nan, math.nan, math.nan, math.nan))]
    rendered = render_report(ReportData.from_dicts(rows))
    assert "Lengths were not measured" in rendered.markdown
    assert set(rendered.figures) == {"majority_logic.png", "levels_logic.png"}
    assert "nan" not in rendered.markdown.lower() and "| paraphrase (benign) | – | – |" in rendered.markdown


def test_extra_sections_render_in_order_with_unique_figure_names(tmp_path, make_row):
    png = render_report(ReportData.from_dicts([make_row("m", "d", "x", 0.1)])).figures["majority_d.png"]
    extra = [
        Section(
            "Doubt",
            "Doubt *after* the cut.",
            figures=[Figure("majority_d", png, "clash")],
            tables=[Table("Doubt rate", ["a", "b"], [["x", 0.4], ["y", math.nan]], align="lr")],
        ),
        Section("Later", "second", figures=[Figure("my plot.png", png)], tables=["| k | v |\n|---|---|\n| a | 7 |"]),
    ]
    data = ReportData.from_dicts([make_row("m", "d", "x", 0.1)]).with_sections(*extra)
    paths = write_report(data, tmp_path)
    md = paths.markdown.read_text("utf-8")
    assert md.index("## Skipped items") < md.index("## Doubt") < md.index("## Later")
    assert "| x | 0.400 |" in md and "| y | – |" in md
    assert "(figures/majority_d-2.png)" in md and "(figures/my-plot.png)" in md
    assert {p.name for p in paths.figures} >= {"majority_d.png", "majority_d-2.png", "my-plot.png"}
    page = paths.html.read_text("utf-8")
    assert "<em>after</em>" in page
    assert "| a | 7 |" in md and "<td>a</td>" in page and "<td>7</td>" in page  # a Markdown table string


def test_stale_figures_are_removed(tmp_path, make_row):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "majority_old.png").write_bytes(b"x")
    write_report(ReportData.from_dicts([make_row("m", "d", "x", 0.1)]), tmp_path)
    assert not (tmp_path / "figures" / "majority_old.png").exists()
    assert (tmp_path / "figures" / "majority_d.png").exists()


def test_html_escapes_text(make_row):
    data = ReportData.from_dicts([make_row("<b>m</b>", "d", "x", 0.1)], title="A & B <script>")
    page = render_report(data).html
    assert "<script>" not in page and "&lt;b&gt;m&lt;/b&gt;" in page and "A &amp; B" in page
