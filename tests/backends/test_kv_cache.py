"""`recovery.backends.kv_cache`: a cache layer that reserves room and writes each token in place holds exactly
what transformers' ``DynamicLayer`` holds, through every operation the decode loop uses, and `HFGenerator`
samples the same texts with it as with transformers' ``DynamicCache``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.cache_utils import DynamicLayer  # noqa: E402

from recovery.backends.kv_cache import ReservedLayer, reserved_cache  # noqa: E402


def states(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, 2, length, 4, generator=generator),
        torch.randn(batch, 2, length, 4, generator=generator),
    )


def assert_same(reserved: ReservedLayer, dynamic: DynamicLayer) -> None:
    assert reserved.get_seq_length() == dynamic.get_seq_length()
    assert torch.equal(reserved.keys, dynamic.keys) and torch.equal(reserved.values, dynamic.values)


@pytest.mark.parametrize("capacity", [32, 6], ids=["room-for-all", "outgrown"])
def test_reserved_layer_holds_what_a_dynamic_layer_holds(capacity: int) -> None:
    reserved, dynamic = ReservedLayer(capacity), DynamicLayer()
    prompt = states(3, 5, seed=0)  # a prefill of 5 positions, then one token per step
    for layer in (reserved, dynamic):
        returned = layer.update(*prompt)
        assert torch.equal(returned[0], prompt[0])
    assert_same(reserved, dynamic)
    reserved.batch_repeat_interleave(2)  # the n samples of each prompt
    dynamic.batch_repeat_interleave(2)
    assert_same(reserved, dynamic)
    for step in range(4):
        token = states(6, 1, seed=step + 1)
        assert all(torch.equal(a, b) for a, b in zip(reserved.update(*token), dynamic.update(*token)))
    assert_same(reserved, dynamic)
    keep = torch.tensor([0, 2, 5])  # finished rows dropped
    reserved.batch_select_indices(keep)
    dynamic.batch_select_indices(keep)
    assert_same(reserved, dynamic)
    for step in range(3):
        token = states(3, 1, seed=10 + step)
        reserved.update(*token)
        dynamic.update(*token)
    assert_same(reserved, dynamic)
    reserved.crop(-2)
    dynamic.crop(-2)
    assert_same(reserved, dynamic)
    token = states(3, 1, seed=20)
    reserved.update(*token)
    dynamic.update(*token)
    assert_same(reserved, dynamic)
    assert reserved.get_seq_length() == 5 + 4 + 3 - 2 + 1


def test_reserved_cache_replaces_only_plain_dynamic_layers() -> None:
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=3, num_attention_heads=2)
    cache = reserved_cache(config, capacity=10)
    assert len(cache.layers) == 3 and all(type(layer) is ReservedLayer for layer in cache.layers)
    assert {layer.capacity for layer in cache.layers} == {10}


def test_hf_generator_samples_the_same_texts_as_with_a_dynamic_cache(tiny_reasoner, monkeypatch) -> None:
    """The tiny reasoner, sampled (n = 4 per request, batched, rows finishing at different steps), with the
    reserved cache and with transformers' own ``DynamicCache``: the same texts, token for token."""
    from transformers import DynamicCache

    import recovery.backends.hf as hf
    from recovery.generation import GenerationRequest, Message, SamplingParams
    from recovery.models import get_spec
    from recovery.toy.dataset import heldout_problems

    model, tokenizer = tiny_reasoner
    sampling = SamplingParams(n=4, temperature=0.6, top_p=0.95, max_new_tokens=200, seed=0)
    requests = [
        GenerationRequest(p.id, sampling=sampling, messages=(Message("user", p.question),)) for p in heldout_problems(6)
    ]

    def sample() -> list[list[str]]:
        generator = hf.HFGenerator(model, tokenizer, spec=get_spec("tiny-reasoner"), seed=0, max_batch_rows=16)
        return [[s.text for s in r.samples] for r in sorted(generator.generate(requests), key=lambda r: r.request_id)]

    reserved = sample()
    monkeypatch.setattr(hf, "reserved_cache", lambda config, capacity: DynamicCache(config=config))
    dynamic = sample()
    assert reserved == dynamic
    assert len({len(text) for texts in reserved for text in texts}) > 1  # rows finished at different steps
