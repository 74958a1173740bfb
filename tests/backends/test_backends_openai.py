"""`OpenAICompatGenerator` against a real HTTP server started here on 127.0.0.1 (a free port): the request
bodies it sends, how results are read back, retries, timeouts and the bound on requests in flight.

The server is `completions_server.FakeCompletionsServer` (standard library, deterministic); the fault
injection tests are in ``test_backends_openai_faults.py``.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("transformers")

from completions_server import MODEL, FakeCompletionsServer, closed_port  # noqa: E402

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


OPEN: list[OpenAICompatGenerator] = []


@pytest.fixture(autouse=True)
def close_generators():
    """Each test's generators are closed after it: their client loops and connections end with the test."""
    yield
    while OPEN:
        OPEN.pop().close()


def make_gen(tokenizer, url: str, **config) -> OpenAICompatGenerator:
    """A generator whose settings are given (tokens, n per request): it sends no probe."""
    config = {"max_retries": 2, "timeout_s": 5.0, "prompt_format": "tokens", "samples_per_request": "n", **config}
    OPEN.append(
        OpenAICompatGenerator(
            ServerConfig(base_url=url, model=MODEL, **config), tokenizer, spec=get_spec("tiny-reasoner")
        )
    )
    return OPEN[-1]


def chat(rid: str, **sampling) -> GenerationRequest:
    return GenerationRequest(
        rid, SamplingParams(**sampling), messages=(Message("user", f"Question {rid}?"),), prefill="Step 1:"
    )


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
    assert [s.text for s in result.samples] == [f"echo {len(ids)} #{i} s7" for i in range(3)]
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
    OPEN.append(gen)
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
    OPEN.append(gen)
    assert gen.spec.template_opens_think  # detected from the loaded tokenizer's template
    (result,) = list(gen.generate([chat("a")]))
    assert result.error is None and server.bodies[-1]["model"] == str(tmp_path)


def test_built_from_a_run_config_and_used_as_a_chat_generator(server_factory, tokenizer, tmp_path) -> None:
    from recovery.backends.registry import make_generator
    from recovery.generation import ChatTextGenerator, Decoding
    from recovery.model_config import ModelConfig

    server = server_factory()
    tokenizer.save_pretrained(tmp_path)
    config = ModelConfig(
        name="tiny",
        path=str(tmp_path),
        backend="openai",
        spec="tiny-reasoner",
        settings={"base_url": server.url, "max_concurrency": 4, "request_timeout_s": 5.0},
    )
    gen = make_generator(config)
    try:
        assert (gen.config.max_concurrency, gen.config.timeout_s) == (4, 5.0)
        reply = ChatTextGenerator(gen)([Message("user", "Question?")], Decoding(seed=3, max_new_tokens=16))
        body = server.bodies[-1]  # after the probe's requests
        assert reply == f"echo {len(body['prompt'])} #0" and not reply.truncated
        assert (body["model"], body["seed"], body["n"], body["max_tokens"]) == (str(tmp_path), 3, 1, 16)
    finally:
        gen.close()
