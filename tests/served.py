"""`transformers serve` started for a test: one model on a free 127.0.0.1 port, in its own process group,
stopped with all its children when the test ends.

``transformers serve`` ships with transformers; it needs fastapi and uvicorn (in the ``dev`` extra).
The server loads its model in a child process: waiting for ``/health`` is not enough, so `served` also
waits for ``/v1/models`` to list the model as loaded.

Imported as a top-level module (``tests/`` is on ``sys.path``, see ``toy_runs.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 — a loopback URL built here
            return json.loads(reply.read())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def served(model: str, log: Path, *options: str) -> Iterator[str]:
    """``transformers serve MODEL`` on CPU (with ``options``, e.g. ``--dtype float32``); yields its base URL
    (``http://127.0.0.1:<port>/v1``) once the model is loaded. ``log`` receives the server's output (shown
    in a failure)."""
    pytest = __import__("pytest")
    for module in ("fastapi", "uvicorn"):
        pytest.importorskip(module, reason="transformers serve needs fastapi and uvicorn (in the dev extra)")
    port = free_port()
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", model]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", *options]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            listed = _get(f"{base}/v1/models")
            if listed and any(m.get("status", {}).get("value") == "loaded" for m in listed.get("data", [])):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                why = "exited" if process.poll() is not None else f"not ready within {START_TIMEOUT_S:.0f}s"
                pytest.fail(f"transformers serve {why}:\n{log.read_text(errors='replace')[-3000:]}", pytrace=False)
            time.sleep(0.5)
        yield f"{base}/v1"
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """Stop the server and every process it started (its process group): SIGTERM, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # a model process left behind in the group
        os.killpg(process.pid, signal.SIGKILL)
