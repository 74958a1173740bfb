"""`recovery run` against an OpenAI-compatible server that refuses every completion request (HTTP 422, as a
real server did for a prompt it could not read): the command exits non-zero with the server's reason on
screen, in one error line, not a skip count and exit 0 (issue 26).

The command runs in a subprocess on the real OpenAI backend; only the server is a stand-in
(`completions_server.FakeCompletionsServer` with ``refuse``). Whether the refusal is met by a check before
any work or by the traces stage, the user must see the same thing: a failure and the server's words.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("openai")

from completions_server import FakeCompletionsServer  # noqa: E402

from recovery.models import tiny_reasoner_dir  # noqa: E402

# In brackets: the server's words are printed verbatim, never read as Rich markup.
DETAIL = "prompt must be a string, not [list]."
SERVER_SAYS = '{"detail": "prompt must be a string, not [list]."}'


def test_a_server_refusing_every_request_fails_the_run_with_its_reason(tmp_path):
    server = FakeCompletionsServer(refuse=(422, {"detail": DETAIL}))
    try:
        cfg = tmp_path / "refused.yaml"
        cfg.write_text(
            f"run_dir: {tmp_path / 'run'}\n"
            "dataset: {name: toy, limit: 4}\n"
            f"models: [{{name: tiny, path: '{tiny_reasoner_dir()}', spec: tiny-reasoner, backend: openai, "
            f"base_url: '{server.url}', request_timeout_s: 5}}]\n"
            "interventions: {names: [toy/random_characters], timesteps: [0.5]}\n"
        )
        command = [sys.executable, "-m", "recovery.cli", "run", str(cfg), "--no-progress"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    finally:
        server.close()
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "HTTP 422" in errors[0] and SERVER_SAYS in errors[0], output
    if done.returncode == 1:  # met by the traces stage: the counts, and every distinct reason in a table
        assert (
            errors[0] == f"error: traces: 4 of 4 requests failed: HTTP 422 from {server.url}/completions: {SERVER_SAYS}"
        )
        assert "failed requests (by reason)" in output
