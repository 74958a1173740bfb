"""`HFGenerator` on a tiny random Llama (hidden 32, 2 layers) with the toy world's tokenizer.

The model is untrained, so texts are gibberish; the tests check the mechanics: one prefill shared by the n
samples, equality with the naive path and with `model.generate` under greedy decoding, left padding, seeds
independent of batch composition, stop strings, EOS, length limits and per-request errors.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from recovery.backends.hf import HFGenerator  # noqa: E402
from recovery.backends.sampling import sample_tokens  # noqa: E402
from recovery.generation import ChatTextGenerator, Decoding, GenerationRequest, Message, SamplingParams  # noqa: E402  # noqa: E402
from recovery.models import get_spec  # noqa: E402

CORPUS = [
    "Step 1: Ann has 3 red apples. Step 2: Bob gives her 4 more, so 3 + 4 = 7.",
    "Wait, let me check that again. The total is 12. The answer is 12.",
    "What is the running total? First 5, then 5 + 6 = 11, then 11 + 2 = 13.",
] * 8
GREEDY = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=12)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on a busy 2-core machine, two OpenMP threads make this tiny model ~100x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM

    from recovery.toy.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(CORPUS, vocab_size=300)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    return model, tokenizer


@pytest.fixture
def gen(tiny) -> HFGenerator:
    model, tokenizer = tiny
    return HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0)


def chat(rid: str, question: str, prefill: str = "Step 1:", **sampling) -> GenerationRequest:
    params = dataclasses.replace(GREEDY, **sampling)
    return GenerationRequest(rid, sampling=params, messages=(Message("user", question),), prefill=prefill)


def by_id(results) -> dict:
    return {r.request_id: r for r in results}


def texts(result) -> list[str]:
    return [s.text for s in result.samples]


SHORT = "What is 3 + 4?"
LONG = "Ann has 3 red apples and Bob gives her 4 more apples. " * 6 + "What is the running total?"


def test_n_samples_shapes_and_shared_prefill(gen: HFGenerator) -> None:
    requests = [
        chat("a", SHORT, n=2, temperature=0.8, seed=1),
        chat("b", LONG, n=3, temperature=0.8, seed=2),
        chat("c", SHORT, n=1),
    ]
    results = by_id(gen.generate(requests))
    assert set(results) == {"a", "b", "c"}
    for request in requests:
        result = results[request.request_id]
        assert result.error is None
        assert len(result.samples) == request.sampling.n
        assert result.prompt_tokens == len(gen.prompt_ids(request))
        assert result.prefilled_tokens == result.prompt_tokens  # one prefill, not n
        for sample in result.samples:
            assert sample.finish_reason == "length" and sample.n_tokens == 12
    assert results["b"].prompt_tokens > results["a"].prompt_tokens


def test_shared_prefill_equals_naive_path_and_model_generate(tiny, gen: HFGenerator) -> None:
    model, tokenizer = tiny
    requests = [chat("a", SHORT, n=3), chat("b", LONG, n=2)]
    shared = by_id(gen.generate(requests))
    naive_gen = HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), share_prefill=False)
    naive = by_id(naive_gen.generate(requests))
    for rid, n in (("a", 3), ("b", 2)):
        assert texts(shared[rid]) == texts(naive[rid])
        assert len(set(texts(shared[rid]))) == 1  # greedy: the n samples agree
        assert naive[rid].prefilled_tokens == n * shared[rid].prompt_tokens
    # An independent reference: transformers' own greedy generate on the same ids.
    ids = torch.tensor([gen.prompt_ids(requests[1])])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=12,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    expected = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
    assert shared["b"].samples[0].text == expected.removesuffix(tokenizer.eos_token)


def test_left_padding_does_not_change_greedy_outputs(gen: HFGenerator) -> None:
    alone = by_id(gen.generate([chat("short", SHORT)]))
    batched = by_id(gen.generate([chat("short", SHORT), chat("long", LONG, prefill="Step 1: Ann")]))
    assert texts(alone["short"]) == texts(batched["short"])


def test_seed_determinism_independent_of_batch_composition(gen: HFGenerator) -> None:
    sampling = dict(n=4, temperature=1.0, top_p=0.9, top_k=None, seed=1234, max_new_tokens=10)
    target = chat("t", SHORT, **sampling)
    alone = by_id(gen.generate([target]))["t"]
    crowd = [chat("x", LONG, n=3, temperature=1.0, seed=5), target, chat("y", SHORT, n=2, temperature=0.7)]
    mixed = by_id(gen.generate(crowd))["t"]
    assert texts(alone) == texts(mixed)
    assert len(set(texts(alone))) > 1  # the n samples are distinct draws
    other = by_id(gen.generate([chat("t", SHORT, **{**sampling, "seed": 99})]))["t"]
    assert texts(other) != texts(alone)


def test_unseeded_requests_derive_a_stable_seed_from_the_generator_seed(tiny) -> None:
    model, tokenizer = tiny
    runs = [
        by_id(
            HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=7).generate(
                [chat("r", SHORT, n=2, temperature=1.0, max_new_tokens=8)]
            )
        )["r"]
        for _ in range(2)
    ]
    assert texts(runs[0]) == texts(runs[1])


def test_unseeded_requests_draw_the_fallback_seed_every_backend_uses(tiny) -> None:
    """An unseeded request samples as if seeded with `fallback_request_seed` (the seed vLLM gives it too)."""
    from recovery.backends.vllm import request_seed
    from recovery.generation import SamplingParams
    from recovery.ids import fallback_request_seed

    model, tokenizer = tiny
    gen = HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=7)
    seed = fallback_request_seed(7, "r")
    assert request_seed(SamplingParams(), 7, "r") == seed < 2**31
    unseeded = by_id(gen.generate([chat("r", SHORT, n=2, temperature=1.0, max_new_tokens=8)]))["r"]
    seeded = by_id(gen.generate([chat("r", SHORT, n=2, temperature=1.0, max_new_tokens=8, seed=seed)]))["r"]
    assert texts(unseeded) == texts(seeded)


def _printable_window(text: str, size: int = 3) -> str:
    """The first printable ``size``-character piece of ``text`` after position 2 (a mid-text stop string)."""
    for i in range(2, len(text) - size):
        piece = text[i : i + size]
        if piece.isprintable() and "\ufffd" not in piece and piece.strip():
            return piece
    raise AssertionError(f"no printable window in {text!r}")


def test_stop_strings_truncate_and_finish_with_stop(gen: HFGenerator) -> None:
    free = by_id(gen.generate([chat("a", SHORT, max_new_tokens=20)]))["a"].samples[0]
    stop = _printable_window(free.text)
    cut = by_id(gen.generate([chat("a", SHORT, max_new_tokens=20, stop=(stop,))]))["a"].samples[0]
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.find(stop)]
    assert cut.n_tokens < free.n_tokens


def test_eos_finishes_with_stop_and_is_not_in_the_text(tiny) -> None:
    model, tokenizer = tiny
    probe = HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"))
    first = probe.tokenizer.encode(by_id(probe.generate([chat("a", SHORT, max_new_tokens=3)]))["a"].samples[0].text)[0]
    gen = HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"))
    gen.eos_ids = frozenset({first})  # the greedy first token now ends the sequence
    sample = by_id(gen.generate([chat("a", SHORT, max_new_tokens=3)]))["a"].samples[0]
    assert (sample.text, sample.n_tokens, sample.finish_reason) == ("", 1, "stop")


def test_context_limit_gives_an_error_result_not_a_crash(tiny) -> None:
    model, tokenizer = tiny
    gen = HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"))
    gen.max_context = len(gen.prompt_ids(chat("ok", SHORT))) + 6
    results = by_id(gen.generate([chat("ok", SHORT, max_new_tokens=50), chat("too-long", LONG)]))
    assert results["too-long"].error and "context" in results["too-long"].error
    assert results["too-long"].samples == ()
    ok = results["ok"]
    assert ok.error is None and ok.samples[0].finish_reason == "length"
    assert ok.prompt_tokens + ok.samples[0].n_tokens == gen.max_context  # clamped to the context window


def test_a_failing_batch_is_retried_per_request(gen: HFGenerator, monkeypatch) -> None:
    real = gen._prefill
    bad_len = len(gen.prompt_ids(chat("bad", LONG)))

    def flaky(prompts, *rest):
        if len(prompts) > 1 or len(prompts[0]) == bad_len:
            raise RuntimeError("simulated out of memory")
        return real(prompts, *rest)

    monkeypatch.setattr(gen, "_prefill", flaky)
    results = by_id(gen.generate([chat("good", SHORT, n=2), chat("bad", LONG)]))
    assert results["good"].error is None and len(results["good"].samples) == 2
    assert "simulated out of memory" in results["bad"].error


def test_raw_prompt_and_batch_limits(gen: HFGenerator) -> None:
    gen.max_batch_rows = 2
    raw = GenerationRequest("raw", sampling=GREEDY, prompt="<|user|>\nHi\n<|assistant|>\n<think>\n", prefill="Step")
    results = by_id(gen.generate([raw, chat("a", SHORT, n=2), chat("b", SHORT, n=3)]))
    assert [len(results[k].samples) for k in ("raw", "a", "b")] == [1, 2, 3]
    assert results["raw"].prompt_tokens == len(gen.tokenizer.encode("<|user|>\nHi\n<|assistant|>\n<think>\nStep"))


def test_chat_text_generator_adapter(gen: HFGenerator) -> None:
    reply = ChatTextGenerator(gen)([Message("user", SHORT)], Decoding(max_new_tokens=5))
    assert isinstance(reply, str) and reply


def test_load_from_a_directory(tiny, tmp_path) -> None:
    model, tokenizer = tiny
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    gen = HFGenerator(str(tmp_path), dtype=None, device="cpu")
    assert gen.spec.template_opens_think and gen.spec.family == "detected"
    result = by_id(gen.generate([chat("a", SHORT, max_new_tokens=4)]))["a"]
    assert result.error is None and result.samples[0].n_tokens == 4
    gen.close()


# --- sampling ------------------------------------------------------------------------------------------


def test_sample_tokens_rules() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.9], [5.0, 0.0, 0.0, 0.0]])
    u = torch.tensor([0.999, 0.5])
    greedy = SamplingParams(temperature=0.0)
    assert sample_tokens(logits, greedy, None).tolist() == [1, 0]
    assert sample_tokens(logits, SamplingParams(temperature=1.0, top_k=1), u).tolist() == [1, 0]
    assert sample_tokens(logits, SamplingParams(temperature=1.0, top_p=0.01), u).tolist() == [1, 0]
    # top_k=2 keeps tokens 1 and 3 in row 0; a uniform near 1 picks the second of them.
    assert sample_tokens(logits, SamplingParams(temperature=1.0, top_k=2), u)[0].item() == 3


def test_sample_tokens_inverse_cdf_matches_the_distribution() -> None:
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4]])).repeat(4000, 1)
    u = torch.rand(4000, generator=torch.Generator().manual_seed(0))
    picked = sample_tokens(logits, SamplingParams(temperature=1.0, top_p=1.0), u)
    freq = torch.bincount(picked, minlength=4).float() / 4000
    assert torch.allclose(freq, torch.tensor([0.1, 0.2, 0.3, 0.4]), atol=0.03)
    # top_p=0.5 keeps 0.4 and 0.3 only (the 0.3 crosses the threshold).
    nucleus = sample_tokens(logits, SamplingParams(temperature=1.0, top_p=0.5), u)
    assert set(nucleus.tolist()) == {2, 3}


def test_chat_text_generator_says_when_a_reply_was_cut(tiny_reasoner):
    """A reply cut at max_new_tokens reaches the interventions as truncated (a paraphrase then fails)."""
    from recovery.backends.hf import HFGenerator
    from recovery.generation import ChatTextGenerator, Decoding, Message
    from recovery.models import get_spec

    model, tokenizer = tiny_reasoner
    chat = ChatTextGenerator(HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0))
    messages = [Message("user", "Start with 3. Add 4. Then subtract 2. What is the result?")]
    cut = chat(messages, Decoding(temperature=0.0, max_new_tokens=3))
    whole = chat(messages, Decoding(temperature=0.0, max_new_tokens=300))
    assert cut.truncated and not whole.truncated
    assert whole.startswith(cut) and len(whole) > len(cut)
