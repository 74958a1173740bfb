"""`OpenAICompatGenerator` against a real local HTTP server that injects faults: 429 with ``Retry-After``,
persistent 500s, connections closed mid-reply, replies slower than the timeout, and a few hundred requests
at once. Every request must end as exactly one result, a success or a failure with its reason, with no
more requests in flight at the server than the configured bound.

Waits are kept short (``Retry-After`` of a fraction of a second, sub-second timeouts); a retry after a
transport error waits the client's own first backoff, about half a second.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("transformers")

from completions_server import MODEL, FakeCompletionsServer  # noqa: E402

from recovery.backends.openai_compat import OpenAICompatGenerator, ServerConfig  # noqa: E402
from recovery.generation import GenerationRequest, Message, SamplingParams  # noqa: E402
from recovery.models import get_spec  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    from recovery.toy.tokenizer import train_tokenizer

    return train_tokenizer(["Step 1: 3 + 4 = 7. Wait, the answer is 7."] * 10, vocab_size=280)


@pytest.fixture
def setup(tokenizer):
    """``setup(server_options, config_options) -> (server, generator)``; both are closed afterwards."""
    made: list = []

    def make(server: dict | None = None, **config) -> tuple[FakeCompletionsServer, OpenAICompatGenerator]:
        fake = FakeCompletionsServer(**(server or {}))
        config = {"max_retries": 2, "timeout_s": 5.0, "prompt_format": "tokens", "samples_per_request": "n", **config}
        gen = OpenAICompatGenerator(
            ServerConfig(base_url=fake.url, model=MODEL, **config), tokenizer, spec=get_spec("tiny-reasoner")
        )
        made.append((fake, gen))
        return fake, gen

    yield make
    for fake, gen in made:
        gen.close()
        fake.close()


def requests(count: int, n: int = 1) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            f"r{i}", SamplingParams(n=n, seed=i), messages=(Message("user", f"Question {i}?"),), prefill="Step 1:"
        )
        for i in range(count)
    ]


def by_id(results) -> dict:
    results = list(results)
    ids = [r.request_id for r in results]
    assert len(ids) == len(set(ids)), f"duplicated results: {ids}"
    return {r.request_id: r for r in results}


def test_429_waits_at_least_retry_after_then_succeeds(setup) -> None:
    server, gen = setup({"fail_first": 1, "fail_status": 429, "retry_after": "0.3"})
    results = by_id(gen.generate(requests(1, n=2)))
    assert results["r0"].error is None and len(results["r0"].samples) == 2
    assert server.calls == 2
    waited = server.arrivals[1] - server.failed_at[0]
    assert waited >= 0.3, f"retried {waited:.3f}s after the 429, before its Retry-After of 0.3s"
    assert waited < 0.3 + 2.0  # the header's wait, not a long backoff of its own


def test_persistent_500s_are_retried_then_counted_failures(setup) -> None:
    server, gen = setup({"fail_first": 10_000, "fail_status": 500, "retry_after": "0.01"}, max_retries=3)
    results = by_id(gen.generate(requests(4)))
    assert sorted(results) == ["r0", "r1", "r2", "r3"]
    for result in results.values():
        assert result.samples == ()
        assert "gave up after 4 attempts" in result.error and "HTTP 500" in result.error and "busy" in result.error
    assert server.calls == 4 * 4  # each request: one attempt plus three retries, no more


def test_a_connection_closed_mid_reply_is_retried(setup) -> None:
    server, gen = setup({"drop_first": 1}, max_concurrency=1)
    results = by_id(gen.generate(requests(2, n=3)))
    assert all(r.error is None and len(r.samples) == 3 for r in results.values())
    assert server.calls == 3  # the cut reply was sent again once; the other request once


def test_connections_always_closed_mid_reply_are_counted_failures(setup) -> None:
    server, gen = setup({"drop_first": 10_000}, max_retries=1)
    results = by_id(gen.generate(requests(3)))
    assert sorted(results) == ["r0", "r1", "r2"]
    for result in results.values():
        assert result.samples == () and result.prompt_tokens > 0
        assert "cannot reach" in result.error and "gave up after 2 attempts" in result.error
    assert server.calls == 3 * 2


def test_replies_slower_than_the_timeout_are_counted_failures(setup) -> None:
    server, gen = setup({"sleep_s": 1.5}, timeout_s=0.25, max_retries=0, max_concurrency=4)
    start = time.monotonic()
    results = by_id(gen.generate(requests(4)))
    elapsed = time.monotonic() - start
    assert all(r.samples == () and "timed out" in r.error and "0.25s" in r.error for r in results.values())
    assert server.calls == 4  # max_retries=0: no second attempt
    assert elapsed < 1.5, f"four timeouts of 0.25s in parallel took {elapsed:.2f}s"


def test_hundreds_in_flight_with_faults_stay_bounded_and_complete(setup) -> None:
    limit, count = 96, 320
    server, gen = setup(
        {"fail_first": 40, "fail_status": 429, "retry_after": "0.05", "drop_first": 5, "sleep_s": 0.25},
        max_concurrency=limit,
        max_retries=4,
    )
    results = by_id(gen.generate(requests(count, n=2)))
    assert sorted(results) == sorted(f"r{i}" for i in range(count))
    assert all(r.error is None and len(r.samples) == 2 for r in results.values())
    assert server.calls == count + 40 + 5  # every fault retried once, every request answered once
    answered = [b["seed"] for b in server.bodies[45:]]
    assert sorted(answered) == list(range(count))  # each request's own seed, each sent until answered once
    assert server.max_in_flight <= limit
    assert server.max_in_flight > limit // 2, f"only {server.max_in_flight} in flight: not concurrent"


def test_closing_the_results_early_cancels_what_is_in_flight(setup) -> None:
    server, gen = setup({"sleep_s": 0.3}, max_concurrency=8)
    stream = gen.generate(requests(40))
    first = next(stream)
    assert first.error is None
    stream.close()
    time.sleep(0.5)
    assert server.calls <= 8 + 8  # what was in flight, plus what it freed before close; not all 40
