"""`FakeCompletionsServer`: a deterministic OpenAI-compatible server (``/v1/completions``, ``/v1/models``)
on 127.0.0.1 in a background thread, for the OpenAI-backend tests.

It records every body it receives, when each call arrived and how many were in flight at once, and can
inject faults on its first calls: an HTTP status with a ``Retry-After`` (``fail_first``), a connection
closed in the middle of the reply (``drop_first``), or a reply slower than the client's timeout
(``sleep_s``); or refuse every completion request (``refuse``: a status and body, as a server that rejects the
requests themselves). Only loopback addresses are used.

It can also behave like servers that implement less than vLLM, as ``transformers serve`` does:
``text_only`` (a token-id prompt is an HTTP 400), ``refuse_fields`` (a body naming one is an HTTP 422
listing them, as for fields outside OpenAI's schema), ``max_choices`` (at most that many choices, whatever
``n`` asks), ``greedy`` (the same text whatever the temperature and seed, unless the body's
``generation_config`` enables sampling: ``transformers serve`` for a model whose generation config does not),
and with a ``tokenizer`` it counts a text prompt's tokens as that tokenizer does, adding a ``bos_id`` first
when given (``tokenizer(prompt)`` of a tokenizer that adds a BOS).

A sampled reply (temperature > 0) ends with `` s<seed>`` (or a call counter when unseeded), so differently
seeded samples differ and equally seeded ones are equal.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "tiny"


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of clients connect at once in the concurrency test

    def handle_error(self, request, client_address) -> None:
        # A client that gave up (the timeout tests) or a reply cut on purpose leaves a broken pipe: expected.
        pass


class FakeCompletionsServer:
    """A deterministic OpenAI-compatible server in a background thread."""

    def __init__(
        self,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: str | None = "0.01",
        drop_first: int = 0,
        sleep_s: float = 0.0,
        refuse: tuple[int, dict] | None = None,
        text_only: bool = False,
        refuse_fields: frozenset[str] = frozenset(),
        max_choices: int | None = None,
        tokenizer=None,
        bos_id: int | None = None,
        greedy: bool = False,
    ) -> None:
        self.fail_first, self.fail_status, self.retry_after = fail_first, fail_status, retry_after
        self.drop_first, self.sleep_s, self.refuse = drop_first, sleep_s, refuse
        self.text_only, self.refuse_fields, self.max_choices = text_only, frozenset(refuse_fields), max_choices
        self.tokenizer, self.bos_id, self.greedy = tokenizer, bos_id, greedy
        self.bodies: list[dict] = []
        self.arrivals: list[float] = []  # time.monotonic() at each POST, in arrival order
        self.failed_at: list[float] = []  # when each injected status reply was sent
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

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

            def _drop(self) -> None:
                """Start a 200 reply, send part of its body, then close the socket."""
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n")
                self.wfile.write(b'{"id": "cmpl-cut", "choices": [')
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

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
                    server.arrivals.append(time.monotonic())
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                # A request stops counting as in flight before its reply is written: once the client has read
                # the reply it may send the next request before this handler would otherwise get to count down.
                try:
                    if call <= server.drop_first:
                        reply = None
                    elif call <= server.drop_first + server.fail_first:
                        headers = {"Retry-After": server.retry_after} if server.retry_after is not None else {}
                        reply = (server.fail_status, {"error": "busy"}, headers)
                    elif server.refuse is not None:
                        reply = (*server.refuse, None)
                    elif body.get("stop") == ["<bad>"]:
                        reply = (400, {"error": "bad stop"}, None)
                    elif server.text_only and not isinstance(body["prompt"], str):
                        reply = (400, {"detail": "prompt must be a string."}, None)
                    elif server.refuse_fields & set(body):
                        unexpected = set(server.refuse_fields & set(body))
                        reply = (422, {"detail": f"Unexpected fields in the request: {unexpected}"}, None)
                    else:
                        time.sleep(server.sleep_s)
                        reply = (200, server.answer(body), None)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                if reply is None:
                    self._drop()
                    return
                if reply[0] == server.fail_status:
                    with server.lock:
                        server.failed_at.append(time.monotonic())
                self._send(*reply)

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def prompt_size(self, prompt: list[int] | str) -> int:
        """The prompt tokens counted: ids as given; text by the tokenizer (with the BOS it adds), else its
        characters."""
        if isinstance(prompt, list) or self.tokenizer is None:
            return len(prompt)
        ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        return len(ids) + (self.bos_id is not None)

    def answer(self, body: dict) -> dict:
        size = self.prompt_size(body["prompt"])
        n = body.get("n", 1)
        if self.max_choices is not None:
            n = min(n, self.max_choices)
        sampled = body.get("temperature", 1.0) > 0
        if self.greedy:
            sampled = sampled and json.loads(body.get("generation_config", "{}")).get("do_sample") is True
        tag = (f" s{body['seed']}" if "seed" in body else f" c{self.calls}") if sampled else ""
        choices = [
            {"index": i, "text": f"echo {size} #{i}{tag}", "finish_reason": "length" if i % 2 else "stop"}
            for i in reversed(range(n))  # out of order on purpose
        ]
        usage = {
            "prompt_tokens": size,
            "completion_tokens": 3 * n,
            "total_tokens": size + 3 * n,
            "prompt_tokens_details": {"cached_tokens": size - 1},
        }
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
            "usage": usage,
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
