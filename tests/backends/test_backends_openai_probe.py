"""The OpenAI backend learns what its server accepts before any work (`recovery.backends.openai_probe`) and
adapts, against a real HTTP server on 127.0.0.1 that behaves like servers implementing less than vLLM
(`completions_server.FakeCompletionsServer`: text-only prompts, refused fields, ``n`` ignored, fewer
choices than asked). The same against ``transformers serve`` itself is in
``test_backends_served.py``.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from completions_server import MODEL, FakeCompletionsServer  # noqa: E402

from recovery.backends.openai_compat import OpenAICompatGenerator, ServerConfig, sample_seed  # noqa: E402
from recovery.backends.openai_probe import ServerError, settings_record  # noqa: E402
from recovery.generation import GenerationRequest, Message, SamplingParams  # noqa: E402
from recovery.models import get_spec  # noqa: E402
from recovery.prompt_building import build_prompt_ids, build_prompt_text  # noqa: E402

SPEC = get_spec("tiny-reasoner")
TRANSFORMERS_SERVE_REFUSES = frozenset({"top_k", "skip_special_tokens", "spaces_between_special_tokens"})


def make_tokenizer(*, bos: bool = False, special_tags: bool = False):
    """The toy tokenizer; with ``bos`` its chat template writes a BOS token (as Llama 3's does); with
    ``special_tags`` the think tags are special tokens."""
    from recovery.toy.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(["Step 1: 3 + 4 = 7. Wait, the answer is 7."] * 10, vocab_size=280)
    if bos:
        tokenizer.add_special_tokens({"bos_token": "<s>"})
        tokenizer.chat_template = "{{ bos_token }}" + tokenizer.chat_template
    if special_tags:
        tokenizer.add_special_tokens({"additional_special_tokens": [SPEC.think_open, SPEC.think_close]})
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture
def setup():
    """``setup(server_options, tokenizer, config_options) -> (server, generator)``; both closed afterwards."""
    made: list = []

    def make(server: dict, tokenizer, **config) -> tuple[FakeCompletionsServer, OpenAICompatGenerator]:
        fake = FakeCompletionsServer(**server)
        gen = OpenAICompatGenerator(
            ServerConfig(base_url=fake.url, model=MODEL, max_retries=1, timeout_s=5.0, **config), tokenizer, spec=SPEC
        )
        made.append((fake, gen))
        return fake, gen

    yield make
    for fake, gen in made:
        gen.close()
        fake.close()


def chat(rid: str, **sampling) -> GenerationRequest:
    return GenerationRequest(
        rid, SamplingParams(**sampling), messages=(Message("user", f"Question {rid}?"),), prefill="Step 1:"
    )


def work_bodies(server: FakeCompletionsServer) -> list[dict]:
    """The bodies of real requests (the probe's ask for at most 8 tokens)."""
    return [body for body in server.bodies if body["max_tokens"] > 8]


def test_a_server_like_vllm_gets_token_ids_and_n_samples_per_request(setup, tokenizer) -> None:
    server, gen = setup({}, tokenizer)
    resolved = gen.probe()
    assert settings_record(resolved) == {
        "prompt_format": "tokens",
        "samples_per_request": "n",
        "strip_bos": False,
        "send_seed": True,
        "extra_body": {"skip_special_tokens": False, "spaces_between_special_tokens": False},
    }
    assert len(server.bodies) == 8  # a handful of short requests
    (result,) = gen.generate([chat("a", n=3, seed=5)])
    (body,) = work_bodies(server)
    assert body["prompt"] == build_prompt_ids(tokenizer, SPEC, chat("a").messages, "Step 1:")
    assert (body["n"], body["seed"], body["skip_special_tokens"]) == (3, 5, False)
    assert result.error is None and len(result.samples) == 3


def test_a_server_like_transformers_serve_gets_text_and_one_seeded_request_per_sample(setup, tokenizer) -> None:
    like_serve = {"text_only": True, "refuse_fields": TRANSFORMERS_SERVE_REFUSES, "max_choices": 1}
    server, gen = setup({**like_serve, "tokenizer": tokenizer}, tokenizer)
    (result,) = gen.generate([chat("a", n=3, seed=5, max_new_tokens=20)])
    assert len(server.bodies) == 8 + 3  # the probe (its eight short requests), then one request per sample
    assert (gen.config.prompt_format, gen.config.samples_per_request, dict(gen.config.extra_body)) == ("text", "1", {})
    bodies = work_bodies(server)
    text = build_prompt_text(tokenizer, SPEC, chat("a").messages, "Step 1:")
    assert [b["prompt"] for b in bodies] == [text] * 3
    assert all(b["n"] == 1 and not set(b) & TRANSFORMERS_SERVE_REFUSES for b in bodies)
    assert sorted(b["seed"] for b in bodies) == sorted(sample_seed(5, i) for i in range(3))
    assert len({sample_seed(5, i) for i in range(3)}) == 3
    assert result.request_id == "a" and result.error is None and len(result.samples) == 3
    assert [s.finish_reason for s in result.samples] == ["stop"] * 3  # each part's only choice, in sample order


def test_a_failed_part_fails_the_whole_result(setup, tokenizer) -> None:
    server, gen = setup({"max_choices": 1}, tokenizer, prompt_format="tokens")
    results = {r.request_id: r for r in gen.generate([chat("bad", n=3, stop=("<bad>",)), chat("ok", n=2)])}
    assert results["bad"].samples == () and results["bad"].error.startswith("sample 0 of 3: HTTP 400")
    assert results["ok"].error is None and len(results["ok"].samples) == 2


def test_text_without_the_bos_the_server_adds(setup) -> None:
    tokenizer = make_tokenizer(bos=True)
    bos_id = tokenizer.bos_token_id
    server, gen = setup({"text_only": True, "tokenizer": tokenizer, "bos_id": bos_id}, tokenizer)
    gen.probe()
    assert (gen.config.prompt_format, gen.config.strip_bos) == ("text", True)
    (result,) = gen.generate([chat("a", n=2)])
    (body,) = work_bodies(server)
    ids = build_prompt_ids(tokenizer, SPEC, chat("a").messages, "Step 1:")
    text = build_prompt_text(tokenizer, SPEC, chat("a").messages, "Step 1:")
    assert ids.count(bos_id) == 1 and text.startswith("<s>")
    assert body["prompt"] == text[len("<s>") :]
    assert result.prompt_tokens == len(ids)  # the server's ids are those the token mode sends: one BOS


def test_text_kept_whole_when_the_server_adds_no_bos(setup) -> None:
    tokenizer = make_tokenizer(bos=True)
    server, gen = setup({"text_only": True, "tokenizer": tokenizer}, tokenizer)
    assert gen.probe().strip_bos is False


def test_a_server_with_another_tokenizer_is_refused(setup, tokenizer) -> None:
    from recovery.toy.tokenizer import train_tokenizer

    other = train_tokenizer(["Quite another corpus, with other merges."] * 10, vocab_size=270)
    _, gen = setup({"text_only": True, "tokenizer": other}, tokenizer)
    with pytest.raises(ServerError, match="counts .* tokens in the prompt text"):
        gen.probe()


def test_fewer_choices_than_asked_is_a_failed_result(setup, tokenizer) -> None:
    server, gen = setup({"max_choices": 2}, tokenizer)  # n=2 probes fine; n=3 comes back short
    assert gen.probe().samples_per_request == "n"
    results = {r.request_id: r for r in gen.generate([chat("a", n=3), chat("b", n=2)])}
    assert results["a"].samples == () and results["a"].error == "server returned 2 of 3 samples"
    assert results["b"].error is None and len(results["b"].samples) == 2


def test_settings_the_server_cannot_honour_fail_before_work_with_its_reason(setup, tokenizer) -> None:
    _, gen = setup({"text_only": True}, tokenizer, prompt_format="tokens")
    with pytest.raises(ServerError, match=r"refuses token-id prompts .*HTTP 400 .*prompt must be a string\."):
        gen.probe()
    _, gen = setup({"max_choices": 1}, tokenizer, samples_per_request="n")
    with pytest.raises(ServerError, match="does not return n samples .*returned 1 of 2 choices"):
        gen.probe()
    _, gen = setup({"refuse_fields": {"top_k"}}, tokenizer)
    with pytest.raises(ServerError, match=r"refuses top_k, which the run's decoding sets: HTTP 422 .*'top_k'"):
        gen.probe(needs_top_k=True)
    server, gen = setup({"refuse_fields": {"top_k"}}, tokenizer)
    gen.probe()  # top_k not needed: not asked
    assert not any("top_k" in body for body in server.bodies)


def test_a_refused_seed_fails_unless_the_user_runs_unseeded(setup, tokenizer) -> None:
    _, gen = setup({"refuse_fields": {"seed"}}, tokenizer)
    with pytest.raises(ServerError, match="refuses a request seed.*require_seed: false"):
        gen.probe()
    server, gen = setup({"refuse_fields": {"seed"}}, tokenizer, require_seed=False)
    (result,) = gen.generate([chat("a", n=2, seed=9)])
    assert gen.config.send_seed is False and result.error is None
    assert work_bodies(server) and not any("seed" in body for body in work_bodies(server))


def test_think_tags_that_are_special_tokens_cannot_go_through_a_server_that_strips_them(setup) -> None:
    refuses = {"refuse_fields": {"skip_special_tokens"}}
    _, gen = setup(refuses, make_tokenizer(special_tags=True))
    with pytest.raises(ServerError, match=r"refuses skip_special_tokens .*think tags \['<think>', '</think>'\]"):
        gen.probe()
    _, gen = setup(refuses, make_tokenizer())  # plain-text tags survive: the field is just dropped
    assert dict(gen.probe().extra_body) == {"spaces_between_special_tokens": False}


def test_a_server_that_samples_only_when_told_is_told_and_one_that_never_does_is_refused(setup, tokenizer) -> None:
    server, gen = setup({"greedy": True}, tokenizer)
    (result,) = gen.generate([chat("a", n=2, seed=4, temperature=0.6, max_new_tokens=20)])
    assert gen.config.extra_body["generation_config"] == '{"do_sample": true}'
    assert result.error is None and result.samples[0].text != result.samples[1].text
    (body,) = work_bodies(server)
    assert body["generation_config"] == '{"do_sample": true}'
    _, gen = setup({"greedy": True, "refuse_fields": {"generation_config"}}, tokenizer)
    with pytest.raises(ServerError, match="returns the same text for 3 requests at temperature 1"):
        gen.probe()


def test_a_server_that_does_not_serve_the_model_names_its_reason(tokenizer) -> None:
    from completions_server import closed_port

    gen = OpenAICompatGenerator(
        ServerConfig(base_url=f"http://127.0.0.1:{closed_port()}/v1", model=MODEL, max_retries=0, timeout_s=2.0),
        tokenizer,
        spec=SPEC,
    )
    try:
        with pytest.raises(ServerError, match="cannot reach http://127.0.0.1:.*/v1/models"):
            gen.probe()
    finally:
        gen.close()


def test_text_after_a_stop_string_is_cut(setup, tokenizer) -> None:
    _, gen = setup({}, tokenizer, prompt_format="tokens", samples_per_request="n")
    (result,) = gen.generate([chat("a", n=2, seed=3, stop=(" #1",))])
    first, second = result.samples  # the server sent "echo N #0 s3" (stop) and "echo N #1 s3" (length)
    assert (first.text, first.finish_reason) == (second.text + " #0 s3", "stop")
    assert (second.text, second.finish_reason) == (first.text.split(" #0")[0], "stop")


def test_model_config_server_settings() -> None:
    from recovery.configs import ConfigError, from_mapping
    from recovery.model_config import ModelConfig

    base = {"name": "m", "backend": "openai", "base_url": "http://127.0.0.1:1/v1"}
    config = from_mapping(ModelConfig, {**base, "prompt_format": "text", "samples_per_request": 1}, where="m")
    assert (config.settings.prompt_format, config.settings.samples_per_request) == ("text", "1")
    with pytest.raises((ConfigError, ValueError), match="prompt_format must be one of"):
        from_mapping(ModelConfig, {**base, "prompt_format": "chat"}, where="m")
    with pytest.raises((ConfigError, ValueError), match="samples_per_request must be one of"):
        from_mapping(ModelConfig, {**base, "samples_per_request": 2}, where="m")
    with pytest.raises(ConfigError, match="m: unknown key 'require_seed' for backend 'hf'"):
        from_mapping(ModelConfig, {"name": "m", "require_seed": False}, where="m")


def test_a_run_probes_once_hands_the_settings_to_its_generators_and_refuses_another_server(tmp_path) -> None:
    """The pipeline probes before any work and builds its generators (here or on Ray replicas, through
    the same picklable factory) with the probed settings, so they send no probe of their own; a resume
    whose server behaves differently is refused before any work."""
    import functools
    import pickle

    from recovery.backends.registry import make_generator
    from recovery.configs import ConfigError
    from recovery.model_config import ModelConfig
    from recovery.pipeline import run_pipeline
    from recovery.run_config import DatasetConfig, RunConfig

    tokenizer = make_tokenizer()
    tokenizer.save_pretrained(tmp_path / "tok")
    vllm_like, serve_like = FakeCompletionsServer(), FakeCompletionsServer(text_only=True, tokenizer=tokenizer)
    try:

        def config(url: str) -> RunConfig:
            model = ModelConfig(
                name="m", path=str(tmp_path / "tok"), spec="tiny-reasoner", backend="openai", settings={"base_url": url}
            )
            return RunConfig(run_dir=str(tmp_path / "run"), dataset=DatasetConfig(name="toy", limit=2), models=[model])

        run_pipeline(config(vllm_like.url), stages=["problems", "continuations"], progress=False)
        record = json.loads((tmp_path / "run" / "servers.json").read_text())["m"]
        assert record["base_url"] == vllm_like.url and record["settings"]["prompt_format"] == "tokens"
        probed = len(vllm_like.bodies)

        factory = pickle.loads(pickle.dumps(functools.partial(make_generator, servers={"m": record["settings"]})))
        generator = factory(config(vllm_like.url).models[0])
        try:
            (result,) = generator.generate([chat("a", n=2, seed=1, max_new_tokens=20)])
        finally:
            generator.close()
        assert result.error is None and len(vllm_like.bodies) == probed + 1  # the work only, no second probe

        with pytest.raises(ConfigError, match=r"server of model 'm' .* behaves differently .*'tokens' → 'text'"):
            run_pipeline(config(serve_like.url), stages=["problems", "continuations"], progress=False)
    finally:
        vllm_like.close()
        serve_like.close()
