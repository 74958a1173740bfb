"""`recovery serve-rewards` started for a test as its users run it: a process of its own on a free loopback port,
stopped with SIGTERM (then SIGKILL) when the test ends; and the process tree read from /proc, to find its
scoring workers and check that none outlives it.

Imported as a top-level module (``tests/`` is on ``sys.path``, see ``toy_runs.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from served import free_port

SRC = str(Path(__file__).resolve().parents[1] / "src")


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


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def scoring_workers(server_pid: int) -> list[int]:
    """The server's scoring processes: the parents of its math-verify workers (each scoring process has one)."""
    parents = set()
    for pid in descendants(server_pid):
        if b"recovery.grading.worker" in cmdline(pid):
            try:
                parents.add(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))
            except OSError:
                continue
    return sorted(parents)


def get_json(url: str, timeout: float = 10) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - loopback
        return json.loads(reply.read())


@contextlib.contextmanager
def serve_rewards(log: Path, *options: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``recovery serve-rewards --port P OPTIONS``; yields (the process, its base URL) once ``/health`` answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "recovery.cli", "serve-rewards", "--port", str(port), *options]
    with log.open("wb") as out:
        server = subprocess.Popen([*command, "--log-level", "warning"], stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get_json(f"{base}/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield server, base
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
