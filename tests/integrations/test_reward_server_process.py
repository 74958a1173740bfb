"""`recovery serve-rewards` as its users run it: a process of its own, stopped with SIGTERM, leaving no worker
behind; and the scoring pool's answers when a worker is stuck or dies (rows answered null with the reason)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from served import free_port  # noqa: E402 - tests/served.py

SRC = str(Path(__file__).resolve().parents[2] / "src")


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (pid → its start time, to tell a reused pid apart), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, stack = {}, [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out[child] = started(child)
            stack.append(child)
    return out


def started(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:  # noqa: S310 - loopback
        return json.loads(reply.read())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_sigterm_stops_the_server_and_every_worker(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "recovery.cli", "serve-rewards", "--port", str(port), "--workers", "2"]
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen([*command, "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2).read()  # noqa: S310
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        row = {"completion": "</think>\\boxed{x + 1}", "answer": "1 + x", "answer_type": "expression"}
        assert post(f"{base}/score", {"rows": [row] * 3})["results"][0]["score"] == 1.0  # math-verify workers ran
        tree = descendants(server.pid)
        commands = [Path(f"/proc/{p}/cmdline").read_bytes() for p in tree]
        assert sum(b"recovery.grading.worker" in c for c in commands) >= 2, commands  # one per scoring worker
        assert len(tree) >= 5  # + 2 scoring workers, the forkserver, the resource tracker
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0
        deadline = time.monotonic() + 15
        while (alive := [p for p, t in tree.items() if started(p) == t]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive, [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()


def test_a_stuck_or_dead_worker_costs_its_rows_a_reason_not_the_batch():
    """One scoring worker, frozen (SIGSTOP): the request ends at its time limit with every row answered null
    and the reason. Then killed: the next request starts a new pool and is scored."""
    import asyncio

    from recovery.integrations.core import RewardSettings
    from recovery.integrations.server.pool import ScoringPool

    # One chunk: it is handed to the frozen worker at once. (Chunks still queued when a request gives up are
    # cancelled; CPython 3.11's executor then fails to mark them broken if that worker dies — a traceback in
    # its manager thread, fixed in 3.12 — so the test keeps none queued.)
    pool = ScoringPool(1, RewardSettings(), chunk_rows=8)
    rows = [{"answer": "7", "answer_type": "numeric", "intervention": "none", "reference_length": None}] * 5
    completions = ["</think>\\boxed{7}"] * 5
    try:
        (pid,) = pool.warm()
        os.kill(pid, signal.SIGSTOP)
        results = asyncio.run(pool.score(completions, rows, timeout_s=1.0))
        assert len(results) == 5 and all(r["score"] is None and "time limit" in r["reason"] for r in results)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        results = asyncio.run(pool.score(completions, rows, timeout_s=30.0))
        assert [r["score"] for r in results] == [1.0] * 5 and pool.restarts == 1
    finally:
        pool.close()
