"""Errors users cause end in one line and a non-zero exit, without a traceback; real bugs keep theirs;
Ctrl-C and SIGTERM end in one line, and the same command resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from recovery.cli import INTERRUPTED, INTERRUPTED_AT_EXIT, app, user_error_message

runner = CliRunner()


def one_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code not in (0, None) and len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_missing_key_keeps_its_last_character(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dataset: {name: toy}\n")
    assert one_line(runner.invoke(app, ["run", str(cfg)])).endswith("missing required key 'run_dir'")


def test_train_without_config_names_the_option():
    assert "--config" in one_line(runner.invoke(app, ["train", "sft"]))


def test_export_refusals(tmp_path):
    not_a_run = tmp_path / "folder"
    not_a_run.mkdir()
    assert "is not a run directory" in one_line(
        runner.invoke(app, ["export", str(not_a_run), "--out", str(tmp_path / "o")])
    )
    assert "--push needs --repo-id" in one_line(
        runner.invoke(app, ["export", str(not_a_run), "--out", str(tmp_path / "o"), "--push"])
    )


def test_export_bad_kinds_and_failed_push(toy_run_for, tmp_path):
    from toy_runs import ToyRunSpec

    run = toy_run_for(ToyRunSpec(interventions=("toy/wrong_continuation",), variants=("teacher",)))
    assert "unknown export kinds ['chainz']" in one_line(
        runner.invoke(app, ["export", str(run.path), "--out", str(tmp_path / "o"), "--kinds", "chainz"])
    )
    result = runner.invoke(
        app,
        [
            "export",
            str(run.path),
            "--out",
            str(tmp_path / "o"),
            "--kinds",
            "chains",
            "--push",
            "--repo-id",
            "someone/x-{kind}",
        ],
    )  # HF_HUB_OFFLINE=1: the push cannot happen
    assert result.exit_code == 2 and "push failed for chains" in result.output
    assert (tmp_path / "o" / "chains" / "README.md").is_file()  # the export is kept


def test_unwritable_run_dir_is_one_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("run_dir: /sys/recovery-run\ndataset: {name: toy, limit: 2}\n")
    assert "cannot write" in one_line(runner.invoke(app, ["problems", str(cfg), "--no-progress"]))


def test_a_full_disk_is_a_user_error_and_a_bug_is_not():
    with pytest.raises(OSError) as full:
        with open("/dev/full", "w") as handle:
            handle.write("x")
    assert "No space left on device" in user_error_message(full.value)
    assert user_error_message(KeyError("run_dir")) is None and user_error_message(ValueError("bug")) is None


def test_a_folder_where_a_file_must_be_is_a_user_error(tmp_path):
    """Any file the project writes or reads that is a folder (beyond the run directory's own files, which the
    run checks first): one line naming it."""
    with pytest.raises(IsADirectoryError) as folder:
        (tmp_path / "report.md").mkdir()
        open(tmp_path / "report.md", "w").close()  # noqa: SIM115 — the error of opening is the point
    message = user_error_message(folder.value)
    assert message == f"{tmp_path / 'report.md'} is a directory, not a file: remove it or name another path"


@pytest.mark.slow
def test_ctrl_c_and_sigterm_are_one_line_and_the_run_resumes(tmp_path):
    """Ctrl-C, then SIGTERM, each mid-generation: one line, exit 130, then a resume that completes. The test
    can only interrupt a run that is still running: when a run ends before the signal is sent (the test's
    own polling lost the race), the scenario starts again in a fresh folder; a signal that reaches a
    running process and does not stop it fails the test."""
    for attempt in range(3):
        if _interrupt_then_resume(tmp_path / f"attempt{attempt}"):
            return
    pytest.fail("every run ended before it could be interrupted")


def _as_from_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: a job started in the background of a non-interactive shell (as CI
    harnesses do) inherits SIGINT ignored, and a process that ignores SIGINT never sees the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class _EndedFirst(Exception):
    """The run finished before the test could send its signal."""


def _interrupt_then_resume(folder) -> bool:
    folder.mkdir()
    cfg = folder / "c.yaml"
    cfg.write_text(
        f"run_dir: {folder / 'run'}\ndataset: {{name: toy, limit: 6, options: {{seed: 3}}}}\n"
        "interventions: {names: [toy/random_characters, toy/wrong_continuation], timesteps: [0.3, 0.7]}\n"
        "continuation: {n: 2, max_new_tokens: 160}\ncpu_workers: 2\nflush_every: 2\n"
    )
    command = [sys.executable, "-m", "recovery.cli", "run", str(cfg), "--no-progress"]
    shards = folder / "run" / "continuations"

    def interrupted(sig: int, after_shards: int) -> None:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=_as_from_a_terminal,
        )
        deadline = time.monotonic() + 180
        while (
            time.monotonic() < deadline
            and process.poll() is None
            and len(list(shards.glob("*.parquet"))) < after_shards
        ):
            time.sleep(0.05)
        if process.poll() is not None:
            process.communicate(timeout=120)
            raise _EndedFirst
        if sig == signal.SIGINT:
            os.killpg(process.pid, sig)  # Ctrl-C reaches the whole foreground group, workers included
        else:
            process.send_signal(sig)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 130, output
        assert output.strip().splitlines()[-1] == INTERRUPTED
        assert "Traceback" not in output and "leaked semaphore" not in output and "KeyboardInterrupt" not in output

    try:
        interrupted(signal.SIGINT, 1)
        interrupted(signal.SIGTERM, len(list(shards.glob("*.parquet"))) + 1)
    except _EndedFirst:
        return False
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    return True


# `recovery interventions`, with an atexit callback that marks when the interpreter's exit work has begun and
# then takes its time (as joining children can): the window between a command's last line and the process's end.
SLOW_EXIT = """
import atexit, pathlib, sys, time
from recovery.cli import main
marker = pathlib.Path(sys.argv.pop())
def slow(): marker.write_text("exiting"); time.sleep(60)
atexit.register(slow)
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_after_the_last_line_ends_in_one_line_with_130(tmp_path, sig):
    """Ctrl-C (to the whole group, as a terminal sends it) or SIGTERM while the atexit callbacks run, after
    the command printed its result: exit 130 and one line, not exit 0 and "Exception ignored in atexit
    callback" with a KeyboardInterrupt traceback; the command's output is whole."""
    marker = tmp_path / "exiting"
    command = [sys.executable, "-c", SLOW_EXIT, "interventions", str(marker)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), process.communicate(timeout=60)
    if sig == signal.SIGINT:
        os.killpg(process.pid, sig)
    else:
        process.send_signal(sig)
    out, err = process.communicate(timeout=30)  # not the callback's 60 s: the signal ended the process
    assert process.returncode == 130 and err.strip() == INTERRUPTED_AT_EXIT, (process.returncode, err)
    assert "toy/wrong_continuation" in out and out.rstrip().endswith("┘"), out  # the table, to its last line


def test_a_run_that_measured_nothing_says_why_and_exits_1(tmp_path):
    """Traces cut at 6 new tokens never close the think block: the filter keeps none, and the run ends with
    exit 1 (not 2: the input was valid) and one error line naming the cause and the setting to change. The
    traces stage alone is a partial run that measured what it was asked to, and exits 0."""
    cfg = tmp_path / "cut.yaml"
    cfg.write_text(
        f"run_dir: {tmp_path / 'run'}\n"
        "dataset: {name: toy, limit: 4, options: {seed: 21}}\n"
        "traces: {sampling: {n: 1, temperature: 0.0, top_p: 1.0, max_new_tokens: 6}}\n"
        "interventions: {names: [toy/random_characters], timesteps: [0.5]}\n"
    )
    partial = runner.invoke(app, ["run", str(cfg), "--stages", "problems,traces", "--no-progress"])
    assert partial.exit_code == 0, partial.output
    result = runner.invoke(app, ["run", str(cfg), "--no-progress"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: filter: kept 0 of 4 traces of model 'tiny-reasoner': 4 no_closing_think_tag — 4 of its traces "
        "stopped at traces.sampling.max_new_tokens (6) before closing the think block: raise it"
    ]
    assert "filter/no_closing_think_tag" in result.output  # the skip table is printed before the line
