"""Analyses and exports of a run that is not finished (issue 37): while another process holds the run's
writer lock, or while the run records that it has not finished, `recovery analyze` and `recovery export`
refuse in one line; with ``--partial`` they say "partial: N of M", and every report of the run shows the
section as partial, never as final. The writer is a real process holding the real lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from recovery.analysis.commands import analyze_app
from recovery.cli import app
from recovery.report.run_report import rewrite_report
from recovery.run_dir.state import mark_finished, mark_writing
from toy_runs import ToyRunSpec, build_toy_run  # tests/toy_runs.py

runner = CliRunner()
SPEC = ToyRunSpec(interventions=("toy/wrong_continuation",), timesteps=(0.5,), n_problems=3, aggregate=True)


@pytest.fixture
def run(tmp_path):
    return build_toy_run(tmp_path / "run", SPEC).path


@pytest.fixture
def writer(run):
    """Another process holding the run's writer lock until the test ends."""
    code = textwrap.dedent(f"""
        import sys
        from recovery.run_dir.lock import exclusive_writer
        with exclusive_writer({str(run)!r}):
            print("held", flush=True)
            sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def one_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def section_file(run):
    return run / "analysis" / "doubt" / "section.json"


def test_an_analysis_of_a_run_being_written_is_refused_or_partial_never_final(run, writer) -> None:
    line = one_line(runner.invoke(app, ["analyze", "doubt", str(run), "--no-progress"]))
    assert "is being written" in line and f"pid {writer.pid}" in line and "--partial" in line, line
    assert not section_file(run).exists()

    done = runner.invoke(app, ["analyze", "--partial", "doubt", str(run), "--no-progress"])
    assert done.exit_code == 0, done.output
    assert json.loads(section_file(run).read_text())["data"]["complete"] is False
    writer.stdin.close()
    writer.wait(timeout=30)
    rewrite_report(run)  # the report of the run once written: the section still says partial
    report = (run / "report" / "report.md").read_text()
    assert "**Partial:** computed on" in report and "while the run was not finished" in report


def test_an_unfinished_run_is_refused_by_analyses_and_exports(run, tmp_path) -> None:
    mark_writing(run)  # what a killed `recovery run` leaves
    line = one_line(runner.invoke(app, ["analyze", "doubt", str(run), "--no-progress"]))
    assert "has not finished" in line, line
    line = one_line(runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "x"), "--kinds", "traces"]))
    assert "recovery export" in line and "has not finished" in line, line
    assert not (tmp_path / "x").exists()

    done = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "p"), "--kinds", "traces", "--partial"])
    assert done.exit_code == 0 and "partial: " in done.output, done.output
    card = (tmp_path / "p" / "traces" / "README.md").read_text()
    assert "partial: " in card and "continuations graded" in card

    mark_finished(run)
    done = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "f"), "--kinds", "traces"])
    assert done.exit_code == 0 and "partial" not in done.output, done.output
    assert "partial" not in (tmp_path / "f" / "traces" / "README.md").read_text()


def test_a_section_computed_on_other_data_than_the_report_says_so(run) -> None:
    done = runner.invoke(app, ["analyze", "doubt", str(run), "--no-progress"])
    assert done.exit_code == 0, done.output
    report = (run / "report" / "report.md").read_text()
    assert "Partial" not in report and "other data" not in report
    # The section as stored by an analysis of the run when it held fewer graded continuations.
    payload = json.loads(section_file(run).read_text())
    payload["data"]["graded"] -= 1
    section_file(run).write_text(json.dumps(payload))
    rewrite_report(run)
    assert "**Computed on other data than this report's:**" in (run / "report" / "report.md").read_text()


def test_partial_goes_after_the_analysis_name_too(run) -> None:
    """``recovery analyze doubt RUN --partial`` (where a user types it) as ``recovery analyze --partial doubt
    RUN``; every analysis command takes it; the next command without it is refused again."""
    mark_writing(run)
    done = runner.invoke(app, ["analyze", "doubt", str(run), "--no-progress", "--partial"])
    assert done.exit_code == 0, done.output
    assert json.loads(section_file(run).read_text())["data"]["complete"] is False
    assert "has not finished" in one_line(runner.invoke(app, ["analyze", "doubt", str(run), "--no-progress"]))
    for info in analyze_app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        shown = runner.invoke(app, ["analyze", name, "--help"], terminal_width=200)
        assert shown.exit_code == 0 and "--partial" in shown.output, (name, shown.output)
