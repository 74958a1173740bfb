"""`recovery serve-rewards` as its users run it: a process of its own, stopped with SIGTERM, leaving no worker
behind (the faults it survives: tests/integrations/test_reward_server_faults.py)."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from reward_serving import descendants, serve_rewards, started  # noqa: E402 - tests/reward_serving.py


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:  # noqa: S310 - loopback
        return json.loads(reply.read())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_sigterm_stops_the_server_and_every_worker(tmp_path):
    with serve_rewards(tmp_path / "server.log", "--workers", "2") as (server, base):
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
