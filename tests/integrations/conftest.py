"""Fixtures of the integration tests: a small toy-world run, its GRPO prompts rendered for the real
DeepSeek-R1-Distill tokenizer (a tokenizer that adds BOS itself), and the completions a trainer would sample
for each row: the run's own continuations (correct, wrong), a doubting one, and one that never closes."""

from __future__ import annotations

import pytest

from toy_runs import ToyRunSpec  # tests/toy_runs.py, on sys.path through the root conftest

pytest.importorskip("datasets")
pytest.importorskip("transformers")

RUN = ToyRunSpec(interventions=("toy/wrong_continuation", "toy/paraphrase"), variants=("teacher", "wrong_answer"))
R1_SPEC = "DeepSeek-R1-Distill-Qwen-7B"


@pytest.fixture(scope="session")
def small_run(toy_run_for):
    return toy_run_for(RUN)


@pytest.fixture(scope="session")
def r1_renderer(r1_tokenizer, small_run):
    from recovery.models import get_spec
    from recovery.training_data import PromptRenderer, load_run

    return PromptRenderer.for_run(r1_tokenizer, get_spec(R1_SPEC), load_run(small_run.path).config)


@pytest.fixture(scope="session")
def grpo(small_run, r1_renderer):
    """The run's GRPO rows (a fifth clean), and per row the completions to score."""
    from recovery.training_data import GRPOPromptConfig, grpo_rows, load_run

    data = load_run(small_run.path)
    rows = grpo_rows(data, r1_renderer, GRPOPromptConfig(clean_fraction=0.2)).rows
    completions = []
    for row in rows:
        own = [c.text for c in data.continuations.get(row["chain_id"], [])]
        boxed = f"</think>The answer is \\boxed{{{row['answer']}}}."
        completions.append([*own, "\n\nWait, that is wrong. Let me redo it." + boxed, "\n\nSo the", boxed])
    return rows, completions


@pytest.fixture(scope="session")
def reward_server():
    """A reward server on a free loopback port, in this process (uvicorn in a thread, configured as `serve`
    configures it), two scoring workers; 2 s to send the headers, 3 s the body (the slow-client tests wait
    them out). Yields its base URL."""
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    import threading
    import time
    import urllib.request

    from recovery.integrations.server import uvicorn_config
    from recovery.integrations.server.app import ServerConfig
    from served import free_port  # tests/served.py

    config = ServerConfig(port=free_port(), workers=2, header_timeout_s=2.0, read_timeout_s=3.0, time_limit_s=60.0)
    server = uvicorn.Server(uvicorn_config(config, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{config.port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=2).read()  # noqa: S310 - loopback
            break
        except OSError:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the reward server did not start") from None
            time.sleep(0.2)
    yield base
    server.should_exit = True
    thread.join(60)
