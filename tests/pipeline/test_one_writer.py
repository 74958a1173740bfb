"""One writer per run directory, every row stored once: a second `recovery run` on a run directory in use fails
at once and leaves the first's tables as a lone run's; a continuations shard deleted and regenerated on a
resume is not graded twice; a run directory that holds a row twice is refused with the remedy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_pipeline_kill_every_stage import contents

from recovery.run_dir.lock import holder_of

CONFIG = {
    "dataset": {"name": "toy", "limit": 6, "options": {"seed": 43}},
    "models": [{"name": "tiny-reasoner", "backend": "hf", "batch_size": 4}],
    "traces": {"sampling": {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 200}},
    "interventions": {"names": ["toy/wrong_continuation", "toy/random_characters"], "timesteps": [0.3, 0.7]},
    "continuation": {"n": 2, "max_new_tokens": 120, "seed": 5},
    "cpu_workers": 2,
    "flush_every": 2,
}


def _config(tmp_path: Path, run_dir: Path) -> Path:
    path = tmp_path / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "run_dir": str(run_dir)}))
    return path


def _recovery(*args: str) -> list[str]:
    return [sys.executable, "-m", "recovery.cli", *args]


def _run(config: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        _recovery("run", str(config), "--no-progress"), env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict, dict]:
    """A lone, uninterrupted run: its directory, its contents and its stored verdict counts."""
    tmp = tmp_path_factory.mktemp("lone")
    run_dir = tmp / "lone"
    done = _run(_config(tmp, run_dir))
    assert done.returncode == 0, done.stderr
    return run_dir, contents(run_dir), json.loads((run_dir / "summary.json").read_text())["grades"]


@pytest.mark.slow
def test_a_second_writer_fails_at_once_and_the_first_writes_as_if_alone(tmp_path, reference):
    run_dir = tmp_path / "shared"
    config = _config(tmp_path, run_dir)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(_recovery("run", str(config), "--no-progress"), env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not holder_of(run_dir) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None and holder_of(run_dir).startswith(f"pid {first.pid}:")
        second = _run(config, timeout=120)
        assert first.poll() is None  # refused while the first was still writing, not after it
        assert second.returncode == 2
        lines = [line for line in (second.stdout + second.stderr).splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in second.stderr, lines
        assert str(run_dir) in lines[0] and "being written by another process" in lines[0]
        assert f"pid {first.pid}" in lines[0]  # who holds it
        assert first.wait(timeout=600) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert contents(run_dir) == reference[1]
    assert json.loads((run_dir / "summary.json").read_text())["grades"] == reference[2]


@pytest.mark.slow
def test_a_regenerated_shard_is_not_graded_twice(tmp_path, reference):
    source, expected, verdicts = reference
    run_dir = tmp_path / "resumed"
    shutil.copytree(source, run_dir)
    shard = sorted((run_dir / "continuations").glob("*.parquet"))[0]
    shard.unlink()  # its continuations are generated again; their grades are stored already
    resumed = _run(_config(tmp_path, run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert contents(run_dir) == expected
    assert json.loads((run_dir / "summary.json").read_text())["grades"] == verdicts
    output = (resumed.stdout + resumed.stderr).splitlines()
    printed = next(line for line in output if line.startswith("grades by verdict"))
    assert printed == "grades by verdict: " + ", ".join(f"{v} {n:,}" for v, n in verdicts.items())


@pytest.mark.slow
def test_a_run_directory_holding_a_row_twice_is_refused_with_the_remedy(tmp_path, reference):
    source, expected, _ = reference
    run_dir = tmp_path / "doubled"
    shutil.copytree(source, run_dir)
    shard = sorted((run_dir / "grades").glob("*.parquet"))[0]
    shutil.copy(shard, shard.with_name("part-i999999-000000.parquet"))  # what a second writer left behind
    refused = _run(_config(tmp_path, run_dir))
    assert refused.returncode == 2
    lines = [line for line in (refused.stdout + refused.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and f"{run_dir / 'grades'} holds" in lines[0] and "stored twice" in lines[0], lines
    shutil.rmtree(run_dir / "grades")  # the stated remedy
    assert _run(_config(tmp_path, run_dir)).returncode == 0
    assert contents(run_dir) == expected
