"""A server that accepts connections and never answers fails the run within the probe deadline, in one line
naming the URL, what was asked and how long it waited, with no asyncio noise (issue 37); a server that
answers the probe but generates slower than the probe deadline is not taken for a dead one.

The silent server is a real loopback socket that accepts and never replies; the answering one is
`completions_server.FakeCompletionsServer`. The command runs in a subprocess on the real OpenAI backend.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("openai")

from completions_server import MODEL, FakeCompletionsServer  # noqa: E402

from recovery.backends.openai_compat import OpenAICompatGenerator, ServerConfig  # noqa: E402
from recovery.generation import GenerationRequest, Message, SamplingParams  # noqa: E402
from recovery.models import get_spec, tiny_reasoner_dir  # noqa: E402

PROBE_DEADLINE_S = 1.5


class SilentServer:
    """Accepts every connection on 127.0.0.1 and keeps it open without ever sending a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_silent_server_fails_the_run_within_the_probe_deadline_in_one_line(tmp_path) -> None:
    server = SilentServer()
    try:
        cfg = tmp_path / "silent.yaml"
        cfg.write_text(
            f"run_dir: {tmp_path / 'run'}\n"
            "dataset: {name: toy, limit: 2}\n"
            f"models: [{{name: tiny, path: '{tiny_reasoner_dir()}', spec: tiny-reasoner, backend: openai, "
            f"base_url: '{server.url}', probe_timeout_s: {PROBE_DEADLINE_S}}}]\n"
            "interventions: {names: [toy/random_characters], timesteps: [0.5]}\n"
        )
        command = [sys.executable, "-m", "recovery.cli", "run", str(cfg), "--no-progress"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        server.close()
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and "Task was destroyed" not in output and "pending" not in output, output
    errors = [line for line in output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error:"), output
    assert f"no answer from {server.url}/models within {PROBE_DEADLINE_S}s" in errors[0], output
    assert "probe_timeout_s" in errors[0], output


def test_the_probe_gives_up_on_a_silent_server_within_its_deadline(tokenizer_for_probe) -> None:
    """The deadline is the probe's own: the generation timeout (600 s here) does not stretch it."""
    server = SilentServer()
    gen = OpenAICompatGenerator(
        ServerConfig(base_url=server.url, model=MODEL, probe_timeout_s=0.5),
        tokenizer_for_probe,
        spec=get_spec("tiny-reasoner"),
    )
    start = time.monotonic()
    try:
        with pytest.raises(Exception, match=f"no OpenAI-compatible server answers at {server.url}"):
            gen.probe()
        elapsed = time.monotonic() - start
    finally:
        gen.close()
        server.close()
    assert elapsed < 0.5 * 4, f"the probe waited {elapsed:.1f}s on a 0.5s deadline"


def test_a_server_slower_than_the_probe_deadline_to_generate_is_not_taken_for_dead(tokenizer_for_probe) -> None:
    """Probe requests are answered at once; a generation request takes longer than the probe deadline and
    well within the generation timeout: it succeeds."""
    fake = FakeCompletionsServer()
    gen = OpenAICompatGenerator(
        ServerConfig(base_url=fake.url, model=MODEL, probe_timeout_s=0.3, timeout_s=10.0),
        tokenizer_for_probe,
        spec=get_spec("tiny-reasoner"),
    )
    try:
        gen.probe()
        fake.sleep_s = 0.8
        request = GenerationRequest("r", SamplingParams(n=1, seed=1), messages=(Message("user", "Q?"),), prefill="S")
        (result,) = list(gen.generate([request]))
    finally:
        gen.close()
        fake.close()
    assert result.error is None and result.samples, result


@pytest.fixture(scope="module")
def tokenizer_for_probe():
    from recovery.toy.tokenizer import train_tokenizer

    return train_tokenizer(["Step 1: 3 + 4 = 7. Wait, the answer is 7."] * 10, vocab_size=280)
