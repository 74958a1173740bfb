"""Stored analysis sections survive a round trip and land in the run report in a stable order."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from recovery.report import ReportData, write_report
from recovery.report.data import Figure, Section, Table
from recovery.report.sections_store import analysis_dir, load_section, load_sections, save_section


def _png() -> bytes:
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _section(title: str) -> Section:
    table = Table("rates", ["index", "rate"], [(1, 0.5), (2, 0.25)], align=["r", "r"], caption="c")
    sub = Section("sub", "inner", figures=[Figure("inner", _png(), "inner fig")], tables=["| a |\n|---|\n| 1 |"])
    return Section(title, "prose", figures=[Figure("curve", _png(), "the curve")], tables=[table], subsections=[sub])


def test_round_trip_keeps_tables_figures_and_subsections(tmp_path):
    original = _section("Doubt")
    save_section(tmp_path, "doubt", original)
    loaded = load_section(tmp_path, "doubt")
    assert loaded.title == "Doubt" and loaded.markdown == "prose"
    assert loaded.tables[0].rows == [(1, 0.5), (2, 0.25)] and loaded.tables[0].align == ["r", "r"]
    assert loaded.figures[0].png_bytes == original.figures[0].png_bytes
    assert loaded.subsections[0].figures[0].png_bytes == original.subsections[0].figures[0].png_bytes
    assert loaded.subsections[0].tables[0].startswith("| a |")


def test_known_analyses_come_first_in_report_order(tmp_path):
    for name in ("zeta_custom", "probes", "doubt"):
        save_section(tmp_path, name, Section(name))
    assert [s.title for s in load_sections(tmp_path)] == ["doubt", "probes", "zeta_custom"]
    assert load_sections(tmp_path / "missing") == []


def test_damaged_section_becomes_a_note_not_a_crash(tmp_path):
    save_section(tmp_path, "doubt", Section("Doubt"))
    (analysis_dir(tmp_path, "doubt") / "section.json").write_text("{not json")
    (section,) = load_sections(tmp_path)
    assert "could not be read" in section.markdown


def test_stored_sections_render_in_report(tmp_path):
    save_section(tmp_path, "doubt", _section("Doubt after the intervention"))
    data = ReportData.from_dicts(sections=load_sections(tmp_path))
    paths = write_report(data, tmp_path / "report")
    md = paths.markdown.read_text()
    assert "Doubt after the intervention" in md and "the curve" in md
    assert len(paths.figures) == 2


def test_bad_names_are_refused(tmp_path):
    for bad in ("", "a/b", ".hidden"):
        try:
            analysis_dir(tmp_path, bad)
        except ValueError as err:
            assert repr(bad) in str(err)
        else:
            raise AssertionError(f"{bad!r} accepted")
