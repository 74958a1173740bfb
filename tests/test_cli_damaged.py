"""Damaged inputs end in one line naming the file and what to do, and doing it resumes to exactly the run that
was never damaged; text from users and files is printed verbatim, never read as Rich markup.

Every case runs the real command line on a real toy run directory: a truncated and an empty Parquet shard, a
truncated ``config.json``, a run_dir that is (or lies inside) a file, a disk that fills up (a small tmpfs,
where the test may mount one). The reference run and the empty config go through a fresh process
(`python -m recovery.cli`); the rest through the same command-line app in this process (typer's runner),
which prints and exits as the process does without paying an interpreter's start and imports per command.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recovery.cli import app
from recovery.run_dir.files import SIDE_FILES
from recovery.store import Table

# Paths with Rich markup in them: a printed path that lost any of it was read as markup.
MARKUP_DIR = "[bold]b[/] [link=x]l [/]"


def config_text(run_dir: Path) -> str:
    return (
        f"run_dir: {json.dumps(str(run_dir))}\n"
        "dataset: {name: toy, limit: 2, options: {seed: 3}}\n"
        "interventions: {names: [toy/wrong_continuation], timesteps: [0.5]}\n"
        "continuation: {n: 2, max_new_tokens: 60}\n"
    )


def fresh_cli(*args: str | Path) -> subprocess.CompletedProcess:
    """``recovery ARGS`` in a fresh process (this checkout's code: PYTHONPATH is inherited)."""
    command = [sys.executable, "-m", "recovery.cli", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def cli(*args: str | Path) -> subprocess.CompletedProcess:
    """``recovery ARGS`` through the command-line app in this process: its exit status and what it printed
    (an exception the app let escape is added to stderr as its traceback, which `one_error_line` refuses)."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, stderr)


def run(config: Path, command=cli) -> subprocess.CompletedProcess:
    return command("run", config, "--no-progress")


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The single line a user error prints (exit 2, no traceback); the text after ``error: ``."""
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 2 and "Traceback" not in output, output
    lines = output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0].removeprefix("error: ")


def contents(run_dir: Path) -> dict:
    """Every output of a run, independent of shard layout and of the folder it lives in."""
    out: dict = {}
    for table in sorted(p for p in run_dir.iterdir() if p.is_dir() and p.name != "report"):
        out[table.name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in Table(table).iter_rows())
    for name in ("clean_accuracy.json", "aggregates.json"):
        out[name] = json.loads((run_dir / name).read_text())
    out["report.md"] = (run_dir / "report" / "report.md").read_text().replace(str(run_dir), "RUN")
    manifest = json.loads((run_dir / "config.json").read_text())
    out["config.json"] = {**manifest, "run_dir": "RUN"}
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict, str]:
    """An undamaged toy run (its folder's name full of markup), its contents and what it printed."""
    folder = tmp_path_factory.mktemp("reference")
    run_dir = folder / MARKUP_DIR / "run"
    config = folder / "c.yaml"
    config.write_text(config_text(run_dir))
    result = run(config, fresh_cli)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir, contents(run_dir), result.stderr


def test_a_path_with_markup_is_printed_verbatim(reference):
    """The run's summary table title and its report's path keep every bracket of the folder's name; with
    ``--no-progress`` no library draws a bar of its own either (transformers' "Loading weights")."""
    run_dir, _, printed = reference
    assert f"run {run_dir}" in printed and f"report: {run_dir / 'report' / 'report.html'}" in printed, printed
    assert "it/s]" not in printed and "Loading weights" not in printed, printed


def damaged_copy(reference: tuple, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the reference run in ``tmp_path``, and its config."""
    run_dir = tmp_path / "run"
    shutil.copytree(reference[0], run_dir)
    config = tmp_path / "c.yaml"
    config.write_text(config_text(run_dir))
    return run_dir, config


def resumes_to_the_reference(config: Path, run_dir: Path, reference: tuple) -> None:
    result = run(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert contents(run_dir) == reference[1]


@pytest.mark.parametrize(
    ("table", "damage", "reason", "reader"),
    [  # truncated, read back by the export; empty, read back by the report
        (
            "chains",
            lambda data: data[: len(data) // 2],
            "Parquet magic bytes not found",
            ("export", "--kinds", "chains"),
        ),
        ("grades", lambda data: b"", "size is 0 bytes", ("report",)),
        pytest.param(
            "continuations",
            lambda data: data[:100],
            "Parquet magic bytes not found",
            ("export", "--kinds", "continuations"),
            marks=pytest.mark.slow,
        ),
    ],
    ids=["truncated", "empty", "continuations"],
)
def test_a_damaged_shard_is_named_and_its_rows_regenerated(reference, tmp_path, table, damage, reason, reader):
    run_dir, config = damaged_copy(reference, tmp_path)
    (shard,) = (run_dir / table).glob("*.parquet")
    shard.write_bytes(damage(shard.read_bytes()))
    read = cli(reader[0], run_dir, *(("--out", tmp_path / "out") if reader[0] == "export" else ()), *reader[1:])
    for result in (run(config), read):  # the run, and a reader of the run
        message = one_error_line(result)
        assert message.startswith(f"{shard}: damaged shard, cannot be read (") and reason in message, message
        assert message.endswith(
            "delete it and resume the run (re-run the same `recovery run` command): its rows are regenerated"
        )
    shard.unlink()  # the stated remedy
    resumes_to_the_reference(config, run_dir, reference)


def test_a_truncated_manifest_is_named_and_written_again(reference, tmp_path):
    run_dir, config = damaged_copy(reference, tmp_path)
    manifest = run_dir / "config.json"
    manifest.write_text(manifest.read_text()[:40])
    for result in (run(config), cli("report", run_dir), cli("export", run_dir, "--out", tmp_path / "out")):
        message = one_error_line(result)
        assert message.startswith(f"{manifest}: damaged file (not valid JSON: "), message
        assert "delete it and resume with the run's own config" in message
    manifest.unlink()
    resumes_to_the_reference(config, run_dir, reference)


def test_damaged_side_files_are_named(reference, tmp_path):
    """An empty ``aggregates.json``, a ``clean_accuracy.json`` that is not UTF-8: the report names each; a
    truncated ``weights.json``: the run names it, and resumes to the reference once it is deleted (the
    aggregate and filter stages write the other two again, as their messages say)."""
    run_dir, config = damaged_copy(reference, tmp_path)
    weights = run_dir / "weights.json"
    weights.write_text(weights.read_text()[:12])
    message = one_error_line(run(config))
    assert message.startswith(f"{weights}: damaged file (not valid JSON: ") and "delete it and resume" in message
    weights.unlink()
    resumes_to_the_reference(config, run_dir, reference)
    (run_dir / "aggregates.json").write_text("")
    message = one_error_line(cli("report", run_dir))
    assert message.startswith(f"{run_dir / 'aggregates.json'}: damaged file (empty); delete it and resume"), message
    (run_dir / "aggregates.json").write_text("[]")
    (run_dir / "clean_accuracy.json").write_bytes(b'[{"model": "\xff"}]')
    message = one_error_line(cli("report", run_dir))
    assert message.startswith(f"{run_dir / 'clean_accuracy.json'}: damaged file (not UTF-8 text"), message


def test_a_side_file_that_is_a_folder_is_named_before_any_work(reference, tmp_path):
    """Each file beside the tables made a folder: `recovery run`, `recovery report` and `recovery export` each
    say so in one line naming it, before any work (the run is still recorded finished); the stated remedy
    (remove it, resume) gives back the reference run; ``config.json`` made a folder fails `recovery run` the
    same way."""
    run_dir, config = damaged_copy(reference, tmp_path)
    assert {p.name for p in run_dir.iterdir()} >= set(SIDE_FILES) - {"servers.json"}  # servers: openai only
    progress = (run_dir / "progress.json").read_text()
    for name in SIDE_FILES:
        side = run_dir / name
        kept = side.with_name(name + ".kept")
        if side.exists():
            side.rename(kept)
        (side / "inside").mkdir(parents=True)
        commands = [["run", str(config), "--no-progress"], ["report", str(run_dir)]]
        commands.append(["export", str(run_dir), "--out", str(tmp_path / "out"), "--kinds", "chains"])
        for command in commands:
            message = one_error_line(cli(*command))
            assert message.startswith(f"{side} is a directory, not a file: remove it and resume"), (command, message)
        shutil.rmtree(side)
        if kept.exists():
            kept.rename(side)
        assert (run_dir / "progress.json").read_text() == progress  # nothing written: still finished
    manifest = run_dir / "config.json"
    manifest.unlink()
    (manifest / "inside").mkdir(parents=True)
    message = one_error_line(run(config))
    assert message == (
        f"{manifest} is a directory, not a file: remove it and resume with the run's own config "
        "(re-run the same `recovery run` command): it is written again from that config"
    )
    shutil.rmtree(manifest)
    resumes_to_the_reference(config, run_dir, reference)


@pytest.mark.slow
def test_a_run_dir_that_is_a_file(reference, tmp_path):
    run_dir = tmp_path / MARKUP_DIR
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.write_text("not a folder")
    config = tmp_path / "c.yaml"
    for target, what in ((run_dir, "is a file"), (run_dir / "run", f"is inside {run_dir}, which is a file")):
        config.write_text(config_text(target))
        assert one_error_line(run(config)).endswith(
            f".run_dir: {target} {what}, not a folder; name a folder for the run directory"
        )
        assert (
            one_error_line(cli("report", target))
            == f"{target} {what}, not a folder; name a folder for the run directory"
        )
    run_dir.unlink()  # the remedy: a folder for the run
    resumes_to_the_reference(config, run_dir / "run", reference)


@contextlib.contextmanager
def tmpfs(mount: Path, size: str):
    """A tmpfs of ``size`` mounted on ``mount`` for the block (the test is skipped where it cannot be)."""
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("cannot mount a tmpfs here: no mount command")
    tried = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if tried.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {tried.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def open_files_under(folder: Path) -> list[str]:
    """The files this process holds open below ``folder`` (Linux's /proc)."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(f"{folder}/"):
                held.append(target)
    return held


@pytest.mark.slow
def test_a_full_disk_names_the_file_and_the_run_resumes(reference, tmp_path):
    """A 24 KiB tmpfs fills up mid-run: one line naming the file it could not write, whose temporary file is
    gone and not held open; with room made (the tmpfs grown), the same command resumes to the reference run.
    Needs permission to mount a tmpfs."""
    with tmpfs(tmp_path / "disk", "24k") as mount:
        run_dir = mount / "run"
        config = tmp_path / "c.yaml"
        config.write_text(config_text(run_dir))
        message = one_error_line(run(config))
        assert message.startswith(f"cannot write {run_dir}/"), message
        written = Path(message.removeprefix("cannot write ").split(": ")[0])
        assert written.parent.exists() and not written.exists()  # the file it could not write
        assert message.endswith(": No space left on device; free some space and re-run the same command to resume")
        assert not list(run_dir.rglob("*.tmp"))  # no partial file left behind
        assert not open_files_under(mount)  # nor held open, removed, keeping its space while the process lives
        subprocess.run(["mount", "-o", "remount,size=16m", str(mount)], check=True)
        resumes_to_the_reference(config, run_dir, reference)


def test_a_read_only_run_dir_names_the_file_it_could_not_write(reference, tmp_path):
    """The reference run on a tmpfs remounted read-only (as root, where chmod stops nothing): `recovery
    report` names the report file it could not write (the first: a figure), never the temporary file beside it (whose clean-up
    fails too on a read-only mount); with the mount writable again the report is written. Needs permission
    to mount a tmpfs."""
    with tmpfs(tmp_path / "disk", "16m") as mount:
        run_dir = mount / "run"
        shutil.copytree(reference[0], run_dir)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        message = one_error_line(cli("report", run_dir))
        assert message.startswith(f"cannot write {run_dir / 'report'}/"), message
        assert message.endswith(": Read-only file system") and ".tmp" not in message, message
        written = Path(message.removeprefix("cannot write ").removesuffix(": Read-only file system"))
        assert written.is_file() and written.name in {"report.md", "report.html"} | {
            p.name for p in (run_dir / "report").rglob("*.png")
        }  # a file of the report (the one written first), not a name made up for the write
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)
        assert cli("report", run_dir).returncode == 0 and not list(run_dir.rglob("*.tmp"))


def test_user_text_is_printed_verbatim(tmp_path):
    """Markup in a model name, a backend, a path and a YAML syntax error: each printed as written, in one line,
    and the parser's own words and position kept whole."""
    folder = tmp_path / MARKUP_DIR
    folder.mkdir(parents=True)
    head = f"run_dir: {json.dumps(str(tmp_path / 'run'))}\ndataset: {{name: toy, limit: 2}}\n"
    cases = {
        "model.yaml": (head + 'models: [{name: "[/]", backend: hf}]\n', "models[0] '[/]': '[/]' is not a local folder"),
        "backend.yaml": (head + 'models: [{name: m, backend: "[link=x]hf"}]\n', "unknown backend '[link=x]hf'"),
        "key.yaml": (head + '"[bold]x": 1\n', "unknown key '[bold]x'"),
        "syntax.yaml": (
            head + "interventions: {names: [a, b\n",
            "invalid YAML: expected ',' or ']', but got '<stream end>' at line 4, column 1 "
            "(while parsing a flow sequence at line 3, column 24)",
        ),
    }
    for name, (text, expected) in cases.items():
        config = folder / name
        config.write_text(text)
        message = one_error_line(run(config))
        assert expected in message and (message.startswith(str(config)) or name == "model.yaml"), message
    # An analysis command prints its errors the same way (it exits 1).
    analysis = cli("analyze", "repeats-sweep", folder / "syntax.yaml")
    assert analysis.returncode == 1 and analysis.stdout.strip() == f"error: {message}", analysis.stdout


def test_an_empty_config_says_it_is_empty(tmp_path):
    config = tmp_path / "empty.yaml"
    config.write_text("# nothing yet\n")
    assert one_error_line(run(config, fresh_cli)) == f"{config}: the config file is empty"


@pytest.mark.slow
def test_an_output_folder_that_is_a_file(reference, tmp_path):
    """``--out`` naming a file, or a path inside one: one line naming the file in the way."""
    blocking = tmp_path / "[bold]file"
    blocking.write_text("in the way")
    run_dir = reference[0]
    message = one_error_line(cli("export", run_dir, "--out", blocking, "--kinds", "chains"))
    assert (
        message == f"cannot write {blocking}: it is a file, where a folder must go; name another path or move it away"
    )
    message = one_error_line(cli("compare", run_dir, run_dir, "--out", blocking / "report"))
    assert message.startswith(f"cannot write {blocking / 'report'}") and f"{blocking} is a file" in message, message
