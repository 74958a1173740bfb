"""The reference budget: prompt and output share one window (the authors' 32,768 tokens), enforced by the
backend per request; a run under the reference budget sends it with every trace and continuation request."""

from __future__ import annotations

import pytest

from recovery.generation import GenerationRequest, Message, SamplingParams
from recovery.plan import plan_for
from recovery.run_config import DatasetConfig, RunConfig


def test_window_is_the_authors_under_the_reference_budget_only():
    reference = RunConfig(run_dir="x", dataset=DatasetConfig(name="toy"), protocol="reference")
    mixed = RunConfig(
        run_dir="x", dataset=DatasetConfig(name="toy"), protocol="reference", protocol_parts={"budget": "default"}
    )
    assert plan_for(reference).max_total_tokens == 32768
    assert plan_for(mixed).max_total_tokens is None
    assert plan_for(RunConfig(run_dir="x", dataset=DatasetConfig(name="toy"))).max_total_tokens is None


def test_hf_backend_stops_where_prompt_and_output_fill_the_window(hf_factory):
    generator = hf_factory(None)
    sampling = SamplingParams(n=2, temperature=1.0, top_p=1.0, max_new_tokens=64, seed=3)
    messages = (Message("user", "What is 2 + 3?"),)
    unbounded = GenerationRequest("free", sampling=sampling, messages=messages)
    prompt_tokens = len(generator.prompt_ids(unbounded))
    bounded = GenerationRequest("bounded", sampling=sampling, messages=messages, max_total_tokens=prompt_tokens + 3)
    full = GenerationRequest("full", sampling=sampling, messages=messages, max_total_tokens=prompt_tokens)
    results = {r.request_id: r for r in generator.generate([unbounded, bounded, full])}
    assert max(s.n_tokens for s in results["free"].samples) > 3
    assert all(s.n_tokens <= 3 for s in results["bounded"].samples)
    assert results["full"].error and "leaves no room" in results["full"].error


@pytest.mark.parametrize(("window", "budget"), [(None, 64), (100, 30)])
def test_new_token_budget(window, budget):
    request = GenerationRequest("r", sampling=SamplingParams(max_new_tokens=64), prompt="p", max_total_tokens=window)
    assert request.new_token_budget(70) == budget


def test_a_prompt_that_fills_the_window_fails_on_every_backend_alike():
    """No room left is the request's own error, so every backend fails it the same way — the server backend
    too, which would otherwise send a request for no tokens at all."""
    from recovery.backends.openai_compat import completion_body
    from recovery.backends.openai_config import ServerConfig

    request = GenerationRequest("r", sampling=SamplingParams(max_new_tokens=64), prompt="p", max_total_tokens=70)
    with pytest.raises(ValueError, match="prompt of 70 tokens leaves no room in 70 tokens"):
        request.new_token_budget(70)
    server = ServerConfig(base_url="http://127.0.0.1:1/v1", model="m")
    with pytest.raises(ValueError, match="leaves no room"):
        completion_body(server, list(range(70)), request)
    assert completion_body(server, list(range(60)), request)["max_tokens"] == 10
