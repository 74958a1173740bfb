"""`OpenAICompatGenerator` against a real HTTP server started here on 127.0.0.1 (a free port).

`FakeCompletionsServer` implements ``/v1/completions`` and ``/v1/models`` deterministically with the
standard library, records every body it receives and how many requests were in flight at once, and can
fail its first k calls (503 / 429) or sleep to trigger client timeouts. Only loopback addresses are used.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("transformers")

from recovery.backends.openai_compat import (  # noqa: E402
    OpenAICompatGenerator,
    ServerConfig,
    ServerError,
    completion_body,
)
from recovery.generation import (  # noqa: E402
    GenerationRequest,
    Message,  # noqa: E402
    SamplingParams,
)
from recovery.models import get_spec  # noqa: E402
from recovery.prompt_building import build_prompt_ids, build_prompt_text  # noqa: E402

MODEL = "tiny"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A client that gave up (the timeout test) leaves a broken pipe behind: expected, not news.
        pass


class FakeCompletionsServer:
    """A deterministic OpenAI-compatible server in a background thread."""

    def __init__(self, *, fail_first: int = 0, fail_status: int = 503, sleep_s: float = 0.0) -> None:
        self.fail_first, self.fail_status, self.sleep_s = fail_first, fail_status, sleep_s
        self.bodies: list[dict] = []
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": MODEL}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.calls += 1
                    call = server.calls
                    server.bodies.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                # A request stops counting as in flight before its reply is written: once the client has read
                # the reply it may send the next request before this handler would otherwise get to count down.
                try:
                    if call <= server.fail_first:
                        reply = (server.fail_status, {"error": "busy"}, {"Retry-After": "0"})
                    elif body.get("stop") == ["<bad>"]:
                        reply = (400, {"error": "bad stop"}, None)
                    else:
                        time.sleep(server.sleep_s)
                        reply = (200, server.answer(body), None)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                self._send(*reply)

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @staticmethod
    def answer(body: dict) -> dict:
        prompt = body["prompt"]
        size = len(prompt)
        choices = [
            {"index": i, "text": f"echo {size} #{i}", "finish_reason": "length" if i % 2 else "stop"}
            for i in reversed(range(body["n"]))  # out of order on purpose
        ]
        usage = {
            "prompt_tokens": size,
            "completion_tokens": 3 * body["n"],
            "prompt_tokens_details": {"cached_tokens": size - 1},
        }
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "model": body["model"],
            "choices": choices,
            "usage": usage,
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    servers: list[FakeCompletionsServer] = []

    def make(**kwargs) -> FakeCompletionsServer:
        servers.append(FakeCompletionsServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def tokenizer():
    from recovery.toy.tokenizer import train_tokenizer

    return train_tokenizer(["Step 1: 3 + 4 = 7. Wait, the answer is 7."] * 10, vocab_size=280)


def make_gen(tokenizer, url: str, **config) -> OpenAICompatGenerator:
    config = {"max_retries": 2, "backoff_s": 0.01, "timeout_s": 5.0, **config}
    return OpenAICompatGenerator(
        ServerConfig(base_url=url, model=MODEL, **config), tokenizer, spec=get_spec("tiny-reasoner")
    )


def chat(rid: str, **sampling) -> GenerationRequest:
    return GenerationRequest(
        rid, SamplingParams(**sampling), messages=(Message("user", f"Question {rid}?"),), prefill="Step 1:"
    )


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_requests_received_and_results_mapped(server_factory, tokenizer) -> None:
    server = server_factory()
    gen = make_gen(tokenizer, server.url)
    assert gen.check_server() == [MODEL]
    request = chat("a", n=3, temperature=0.6, top_p=0.95, top_k=20, seed=7, max_new_tokens=100, stop=("</think>",))
    (result,) = list(gen.generate([request]))
    ids = build_prompt_ids(tokenizer, gen.spec, request.messages, "Step 1:")
    assert server.bodies == [
        {
            "model": MODEL,
            "prompt": ids,
            "n": 3,
            "temperature": 0.6,
            "top_p": 0.95,
            "max_tokens": 100,
            "top_k": 20,
            "seed": 7,
            "stop": ["</think>"],
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
        }
    ]
    assert result.error is None
    assert [s.text for s in result.samples] == [f"echo {len(ids)} #{i}" for i in range(3)]
    assert [s.finish_reason for s in result.samples] == ["stop", "length", "stop"]
    assert (result.prompt_tokens, result.prefilled_tokens) == (len(ids), 1)
    assert all(s.n_tokens == len(tokenizer.encode(s.text, add_special_tokens=False)) for s in result.samples)


def test_text_prompt_format_and_optional_fields(server_factory, tokenizer) -> None:
    server = server_factory()
    gen = make_gen(tokenizer, server.url, prompt_format="text", extra_body={})
    request = chat("b", n=1)
    (result,) = list(gen.generate([request]))
    body = server.bodies[0]
    assert body["prompt"] == build_prompt_text(tokenizer, gen.spec, request.messages, "Step 1:")
    assert "top_k" not in body and "seed" not in body and "stop" not in body and "skip_special_tokens" not in body
    assert result.samples[0].n_tokens == 3  # n == 1: the usage count is per choice
    assert completion_body(gen.config, "p", request)["prompt"] == "p"


def test_retries_with_backoff_on_503_then_succeeds(server_factory, tokenizer) -> None:
    server = server_factory(fail_first=2)
    gen = make_gen(tokenizer, server.url, max_concurrency=1)
    (result,) = list(gen.generate([chat("a", n=2)]))
    assert result.error is None and len(result.samples) == 2
    assert server.calls == 3


def test_429_is_retried_and_retries_run_out(server_factory, tokenizer) -> None:
    server = server_factory(fail_first=10, fail_status=429)
    gen = make_gen(tokenizer, server.url, max_retries=2)
    (result,) = list(gen.generate([chat("a")]))
    assert result.samples == () and "gave up after 3 attempts" in result.error and "HTTP 429" in result.error
    assert server.calls == 3


def test_client_errors_are_not_retried(server_factory, tokenizer) -> None:
    server = server_factory()
    gen = make_gen(tokenizer, server.url)
    results = {r.request_id: r for r in gen.generate([chat("bad", stop=("<bad>",)), chat("ok")])}
    assert "HTTP 400" in results["bad"].error and results["ok"].error is None
    assert server.calls == 2


def test_concurrency_is_bounded(server_factory, tokenizer) -> None:
    server = server_factory(sleep_s=0.15)
    gen = make_gen(tokenizer, server.url, max_concurrency=3)
    results = list(gen.generate([chat(f"r{i}", n=1) for i in range(8)]))
    assert sorted(r.request_id for r in results) == [f"r{i}" for i in range(8)]
    assert all(r.error is None for r in results)
    assert server.max_in_flight == 3


def test_per_request_timeout(server_factory, tokenizer) -> None:
    server = server_factory(sleep_s=1.0)
    gen = make_gen(tokenizer, server.url, timeout_s=0.2, max_retries=1)
    start = time.monotonic()
    (result,) = list(gen.generate([chat("slow")]))
    assert "timed out" in result.error and result.samples == ()
    assert server.calls == 2 and time.monotonic() - start < 1.5


def test_unreachable_server_is_an_error_result_and_a_clear_check(tokenizer) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    gen = make_gen(tokenizer, url, max_retries=1)
    results = list(gen.generate([chat("a"), chat("b")]))
    assert all(r.samples == () and "cannot reach" in r.error for r in results)
    with pytest.raises(ServerError, match="no OpenAI-compatible server answers at"):
        gen.check_server()


def test_check_server_names_the_served_models(server_factory, tokenizer) -> None:
    server = server_factory()
    gen = OpenAICompatGenerator(
        ServerConfig(base_url=server.url, model="other"), tokenizer, spec=get_spec("tiny-reasoner")
    )
    with pytest.raises(ServerError, match="serves \\['tiny'\\], not 'other'"):
        gen.check_server()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        ServerConfig(base_url="http://127.0.0.1:1/v1", model="m", prompt_format="chat")


def test_a_request_whose_prompt_cannot_be_built_fails_alone(server_factory, tokenizer, monkeypatch) -> None:
    server = server_factory()
    gen = make_gen(tokenizer, server.url)
    real = gen.prompt

    def prompt(request):
        if request.request_id == "broken":
            raise ValueError("template exploded")
        return real(request)

    monkeypatch.setattr(gen, "prompt", prompt)
    results = {r.request_id: r for r in gen.generate([chat("broken"), chat("fine")])}
    assert "template exploded" in results["broken"].error and results["fine"].error is None
    assert server.calls == 1


def test_keyword_construction_loads_the_tokenizer_from_the_model_path(server_factory, tokenizer, tmp_path) -> None:
    server = server_factory()
    tokenizer.save_pretrained(tmp_path)
    gen = OpenAICompatGenerator(base_url=server.url, model=str(tmp_path), max_concurrency=2, timeout_s=5.0)
    assert gen.spec.template_opens_think  # detected from the loaded tokenizer's template
    (result,) = list(gen.generate([chat("a")]))
    assert result.error is None and server.bodies[0]["model"] == str(tmp_path)
