"""The viewer on runs as they come: a run still being written, a folder that is not a run, the command's own
server (its URL printed, Ctrl-C stopping it), and the report's links into it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from html import escape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from recovery.cli import app as cli_app
from recovery.report.viewer_links import cell_url
from recovery.run_dir import open_run, records
from recovery.run_dir.state import mark_writing, run_state
from recovery.viewer.app import Viewer, create_app

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def partial_run(before_run, tmp_path_factory):
    """A copy of the toy run whose writer has graded half of the continuations so far."""
    path = tmp_path_factory.mktemp("partial") / "run"
    shutil.copytree(before_run.path, path)
    run = open_run(path)
    grades = run.tables.grades.read()
    shutil.rmtree(run.tables.grades.path)
    with run.tables.grades.writer(records.GRADES) as writer:
        writer.add_many(grades.slice(0, grades.num_rows // 2).to_pylist())
    (path / "aggregates.json").unlink()
    mark_writing(run)
    return path, grades.num_rows


def test_a_run_being_written_shows_what_is_stored_and_says_partial(partial_run):
    path, all_graded = partial_run
    client = TestClient(create_app(Viewer.load(path)))
    index = client.get("/cells").text
    state = run_state(path)  # M: the chains × the N the run's config asks for
    assert state.graded == all_graded // 2
    assert escape(f"partial: {state.graded:,} of {state.expected:,} continuations graded") in index
    assert "computed now" in index
    ungraded = client.get("/chains?outcome=ungraded")
    graded = client.get("/chains?outcome=mixed")
    count = lambda r: int(re.search(r"id=total>(\d+) chains", r.text).group(1))  # noqa: E731
    assert count(ungraded) > 0 and count(graded) > 0
    assert count(ungraded) + count(graded) == len(open_run(path).tables.chains.read(["id"]))
    chain = re.search(r'href="/chain/([0-9a-f]+)"', ungraded.text).group(1)
    assert "ungraded" in client.get(f"/chain/{chain}").text


def test_a_folder_that_is_not_a_run_is_one_line_before_any_server(tmp_path):
    folder = tmp_path / "not-a-run"
    folder.mkdir()
    result = CliRunner().invoke(cli_app, ["view", str(folder)])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert f"{folder} is not a run directory" in line
    missing = CliRunner().invoke(cli_app, ["view", str(tmp_path / "absent")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_the_command_prints_its_url_serves_and_stops_on_ctrl_c(before_run, after_run):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "recovery", "view", str(before_run.path), "--compare", str(after_run.path)]
    server = subprocess.Popen(
        [*command, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        lines = []
        for line in server.stdout:
            lines.append(line)
            if "viewer: http://" in line:
                break
        url = re.search(r"http://127\.0\.0\.1:\d+", "".join(lines)).group(0)
        with urllib.request.urlopen(f"{url}/cells", timeout=30) as response:
            assert response.status == 200 and "Cells of" in response.read().decode()
        server.send_signal(signal.SIGINT)
        rest = server.stdout.read()
        assert server.wait(timeout=30) == 0, rest
        assert "viewer stopped" in rest and "Traceback" not in rest
    finally:
        if server.poll() is None:
            server.kill()


def test_the_report_links_each_cell_into_the_viewer(before_run, tmp_path):
    from recovery.report.run_report import rewrite_report

    path = tmp_path / "run"
    shutil.copytree(before_run.path, path)
    report = rewrite_report(path).read_text()
    assert f"recovery view {path}" in report
    _, chain = before_run.chains[0]
    link = cell_url("tiny-reasoner", "toy", chain.intervention, chain.target_t)
    assert f'href="{link.replace("&", "&amp;")}"' in report
    client = TestClient(create_app(Viewer.load(path)))
    assert client.get(link.split(":8765", 1)[1]).status_code == 200


def test_the_demo_ends_with_the_command_that_compares_its_runs(tmp_path):
    from recovery.demo.results import DemoResult, Measurement

    before = Measurement(tmp_path / "base run", None, [], [])
    after = Measurement(tmp_path / "sft", None, [], [])
    assert DemoResult(before, after).view_command == f"recovery view '{tmp_path}/base run' --compare {tmp_path}/sft"
    assert DemoResult(before).view_command == f"recovery view '{tmp_path}/base run'"


def test_doubt_comes_from_the_runs_stored_analysis_when_there_is_one(before_run, tmp_path):
    """With ``recovery analyze doubt`` stored, the viewer shows its detector's flags, and says so; the lexical
    detector stored there agrees with the viewer's own lexical flags on the same run."""
    from recovery.analysis.doubt_curve import analyze_doubt

    path = tmp_path / "run"
    shutil.copytree(before_run.path, path)
    analyze_doubt(path, progress=False)
    stored = TestClient(create_app(Viewer.load(path)))
    computed = TestClient(create_app(Viewer.load(before_run.path)))
    count = lambda r: int(re.search(r"id=total>(\d+) chains", r.text).group(1))  # noqa: E731
    for answer in ("yes", "no"):
        assert count(stored.get(f"/chains?doubt={answer}")) == count(computed.get(f"/chains?doubt={answer}"))
    chain = re.search(r'href="/chain/([0-9a-f]+)"', stored.get("/chains?doubt=yes").text).group(1)
    page = stored.get(f"/chain/{chain}").text
    assert "detector: lexical (stored doubt analysis)" in page and '<mark class="doubt">' in page
    assert page.count('<mark class="doubt">') == computed.get(f"/chain/{chain}").text.count('<mark class="doubt">')


def test_a_port_in_use_is_one_line_before_the_runs_are_read(before_run):
    from recovery.viewer.command import bind

    taken = bind("127.0.0.1", 0)
    try:
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(cli_app, ["view", str(before_run.path), "--port", port])
    finally:
        taken.close()
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line
