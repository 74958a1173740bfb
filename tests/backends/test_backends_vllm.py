"""`VLLMGenerator` without vllm: the exact engine and sampling arguments built, the output mapping, and the
data-parallel worker plumbing, with `FakeLLM` standing in for ``vllm.LLM`` (vllm is not installed here;
the backend was not run on a GPU in this environment).
"""

from __future__ import annotations

import importlib.util
import os
from types import SimpleNamespace

import pytest

# Checked without importing: worker processes import this module and should stay light.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")

from recovery.backends.vllm import (  # noqa: E402
    VLLMConfig,
    VLLMGenerator,
    build_inputs,
    llm_kwargs,
    request_seed,
    sampling_kwargs,
    to_result,
)
from recovery.generation import (  # noqa: E402
    GenerationRequest,
    Message,  # noqa: E402
    SamplingParams,
)
from recovery.models import get_spec  # noqa: E402
from recovery.prompt_building import build_prompt_ids  # noqa: E402

FAKE = (f"{__name__}:FakeLLM", f"{__name__}:FakeSamplingParams")
POISON = "<poison>"  # a stop string that makes FakeLLM reject the whole batch


class FakeSamplingParams:
    """Records its keyword arguments like ``vllm.SamplingParams`` would hold them."""

    def __init__(self, **kwargs) -> None:
        if kwargs.get("fail_to_start"):
            raise RuntimeError("no GPU here")
        self.kwargs = kwargs


class FakeLLM:
    """A deterministic stand-in for ``vllm.LLM``: loads the tokenizer from ``model`` (a directory), answers
    each prompt with n samples that spell out what they were given, and fakes prefix-cache hits."""

    instances: list[FakeLLM] = []

    def __init__(self, **kwargs) -> None:
        if kwargs.get("fail_to_start"):
            raise RuntimeError("no GPU here")
        self.kwargs = kwargs
        self.calls: list[tuple[list, list]] = []
        self.seen: set[tuple[int, ...]] = set()
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        from transformers import (
            AutoTokenizer,  # lazily: data-parallel workers never need it
        )

        return AutoTokenizer.from_pretrained(self.kwargs["tokenizer"])

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        outputs = []
        for prompt, p in zip(prompts, params, strict=True):
            ids = tuple(prompt["prompt_token_ids"])
            if POISON in (p.kwargs["stop"] or ()):
                raise ValueError("poisoned prompt")
            if "<die>" in (p.kwargs["stop"] or ()):
                os._exit(3)  # a replica crashing hard (e.g. killed for memory)
            cached = len(ids) - 1 if ids in self.seen else 0
            self.seen.add(ids)
            devices = os.environ.get("CUDA_VISIBLE_DEVICES", "-")
            samples = [
                SimpleNamespace(
                    text=f"s{i} seed={p.kwargs['seed']} gpu={devices}" + ("<|end|>" if i == 0 else ""),
                    token_ids=list(range(i + 1)),
                    finish_reason="length" if i % 2 else "stop",
                )
                for i in range(p.kwargs["n"])
            ]
            outputs.append(SimpleNamespace(prompt_token_ids=list(ids), outputs=samples, num_cached_tokens=cached))
        return outputs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A directory holding the toy tokenizer, standing in for a model checkpoint."""
    from recovery.toy.tokenizer import train_tokenizer

    directory = tmp_path_factory.mktemp("fake-model")
    train_tokenizer(["Step 1: 3 + 4 = 7. Wait, the answer is 7."] * 10, vocab_size=280).save_pretrained(directory)
    return str(directory)


def chat(rid: str, question: str = "What is 3 + 4?", **sampling) -> GenerationRequest:
    return GenerationRequest(rid, SamplingParams(**sampling), messages=(Message("user", question),), prefill="Step 1:")


# --- pure construction ---------------------------------------------------------------------------------


def test_a_models_vllm_settings_become_its_engine_config() -> None:
    from recovery.backends.registry import vllm_engine_config
    from recovery.model_config import ModelConfig

    settings = {"dtype": "bfloat16", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.5, "max_model_len": 4096}
    model = ModelConfig(name="m", path="org/m", backend="vllm", settings={**settings, "data_parallel_size": 3})
    assert vllm_engine_config(model, 7) == VLLMConfig(model="org/m", seed=7, data_parallel_size=3, **settings)
    assert vllm_engine_config(ModelConfig(name="m", backend="vllm"), 0) == VLLMConfig(model="m")


def test_llm_kwargs_exact() -> None:
    config = VLLMConfig(
        model="deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        tensor_parallel_size=2,
        data_parallel_size=4,
        max_model_len=34000,
        seed=3,
        dtype="bfloat16",
        gpu_memory_utilization=0.85,
        extra={"enforce_eager": True},
    )
    assert llm_kwargs(config) == {
        "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "tokenizer": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "seed": 3,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "trust_remote_code": False,
        "max_model_len": 34000,
        "enforce_eager": True,
    }
    assert "max_model_len" not in llm_kwargs(VLLMConfig(model="m"))
    with pytest.raises(ValueError):
        VLLMConfig(model="m", data_parallel_size=0)


def test_sampling_kwargs_exact_for_paper_phi_and_greedy() -> None:
    paper = get_spec("QwQ-32B").trace_decoding
    assert sampling_kwargs(paper, seed=11) == {
        "n": 8,
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": -1,
        "seed": 11,
        "max_tokens": 32768,
        "stop": None,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }
    phi = sampling_kwargs(get_spec("Phi-4-reasoning-plus").trace_decoding, seed=1, max_tokens=100)
    assert (phi["temperature"], phi["top_k"], phi["top_p"], phi["max_tokens"]) == (0.8, 50, 0.95, 100)
    greedy = sampling_kwargs(SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, stop=("\n\n",)), seed=0)
    assert (greedy["n"], greedy["temperature"], greedy["stop"], greedy["max_tokens"]) == (
        1,
        0.0,
        ["\n\n"],
        64,
    )


def test_request_seed_given_or_derived() -> None:
    assert request_seed(SamplingParams(seed=5), 0, "a") == 5
    derived = request_seed(SamplingParams(), 0, "item-1")
    assert derived == request_seed(SamplingParams(), 0, "item-1") != request_seed(SamplingParams(), 0, "item-2")
    assert 0 <= derived < 2**31


def test_build_inputs_token_prompts_and_limits(model_dir) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    spec = get_spec("tiny-reasoner")
    config = VLLMConfig(model=model_dir, max_model_len=40, seed=9)
    requests = [
        chat("a", n=4, seed=1, max_new_tokens=1000),
        chat("long", question="Step 1: 3 + 4 = 7. " * 20),
        GenerationRequest("raw", SamplingParams(n=1), prompt="<|user|>\nHi\n<|assistant|>\n", prefill="Step"),
    ]
    ready, failed = build_inputs(tok, spec, requests, config)
    assert [r.request_id for r in ready] == ["a", "raw"]
    assert [f.request_id for f in failed] == ["long"] and "max_model_len=40" in failed[0].error
    a = ready[0]
    ids = build_prompt_ids(tok, spec, requests[0].messages, "Step 1:")
    assert a.prompt == {"prompt_token_ids": ids}
    assert a.sampling == sampling_kwargs(requests[0].sampling, seed=1, max_tokens=40 - len(ids))
    assert ready[1].sampling["seed"] == request_seed(SamplingParams(), 9, "raw")


def test_to_result_mapping() -> None:
    output = SimpleNamespace(
        prompt_token_ids=[1, 2, 3, 4],
        num_cached_tokens=3,
        outputs=[
            SimpleNamespace(text="abc<|end|>", token_ids=[5, 6, 7], finish_reason="stop"),
            SimpleNamespace(text="abcd", token_ids=[5, 6, 7, 8], finish_reason="length"),
            SimpleNamespace(text="", token_ids=[], finish_reason=None),
        ],
    )
    result = to_result("r", output, eos_token="<|end|>")
    assert (result.prompt_tokens, result.prefilled_tokens) == (4, 1)
    assert [(s.text, s.n_tokens, s.finish_reason) for s in result.samples] == [
        ("abc", 3, "stop"),
        ("abcd", 4, "length"),
        ("", 0, "error"),
    ]
    del output.num_cached_tokens
    assert to_result("r", output).prefilled_tokens is None


def test_missing_vllm_gives_a_clear_error() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed")
    with pytest.raises(ImportError, match="recovery\\[vllm\\]"):
        VLLMGenerator("some/model")


# --- generator with the fake engine --------------------------------------------------------------------


def test_generator_passes_exact_arguments_and_maps_results(model_dir) -> None:
    config = VLLMConfig(model=model_dir, seed=2)
    gen = VLLMGenerator(config, spec=get_spec("tiny-reasoner"), llm_class=FAKE[0], params_class=FAKE[1])
    llm = FakeLLM.instances[-1]
    assert llm.kwargs == llm_kwargs(VLLMConfig(model=model_dir, seed=2))
    requests = [chat("a", n=3, seed=7), chat("b", n=2, temperature=0.0, top_p=1.0)]
    results = {r.request_id: r for r in gen.generate(requests)}
    prompts, params = llm.calls[-1]
    assert [p.kwargs for p in params] == [
        sampling_kwargs(requests[0].sampling, seed=7),
        sampling_kwargs(requests[1].sampling, seed=request_seed(requests[1].sampling, 2, "b")),
    ]
    assert prompts[0] == {
        "prompt_token_ids": build_prompt_ids(gen.tokenizer, gen.spec, requests[0].messages, "Step 1:")
    }
    a = results["a"]
    assert [s.text for s in a.samples] == ["s0 seed=7 gpu=-", "s1 seed=7 gpu=-", "s2 seed=7 gpu=-"]
    assert [s.finish_reason for s in a.samples] == ["stop", "length", "stop"]
    assert a.prefilled_tokens == a.prompt_tokens  # first time: nothing cached
    again = next(iter(gen.generate([chat("a", n=1, seed=7)])))
    assert again.prefilled_tokens == 1  # the fake prefix cache hit all but one token
    gen.close()


def test_a_rejected_batch_is_retried_per_request(model_dir) -> None:
    gen = VLLMGenerator(
        VLLMConfig(model=model_dir), spec=get_spec("tiny-reasoner"), llm_class=FAKE[0], params_class=FAKE[1]
    )
    results = {r.request_id: r for r in gen.generate([chat("ok", n=2), chat("bad", stop=(POISON,))])}
    assert results["ok"].error is None and len(results["ok"].samples) == 2
    assert "poisoned prompt" in results["bad"].error and results["bad"].samples == ()


def test_data_parallel_workers_split_contiguous_chunks(model_dir, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    config = VLLMConfig(model=model_dir, data_parallel_size=2, seed=1)
    gen = VLLMGenerator(config, spec=get_spec("tiny-reasoner"), llm_class=FAKE[0], params_class=FAKE[1])
    try:
        requests = [chat(f"r{i}", n=1, seed=i) for i in range(5)]
        results = {r.request_id: r for r in gen.generate(requests)}
        assert sorted(results) == [f"r{i}" for i in range(5)]
        gpus = {rid: r.samples[0].text.rsplit("gpu=", 1)[1] for rid, r in results.items()}
        assert gpus == {"r0": "4", "r1": "4", "r2": "4", "r3": "5", "r4": "5"}
        assert all(r.error is None for r in results.values())
    finally:
        gen.close()


def test_a_replica_that_cannot_start_is_a_clear_error(model_dir) -> None:
    config = VLLMConfig(model=model_dir, data_parallel_size=2, extra={"fail_to_start": True})
    with pytest.raises(RuntimeError, match="failed to start: RuntimeError: no GPU here"):
        VLLMGenerator(config, spec=get_spec("tiny-reasoner"), llm_class=FAKE[0], params_class=FAKE[1])


def test_a_dead_replica_fails_its_requests_only(model_dir) -> None:
    config = VLLMConfig(model=model_dir, data_parallel_size=2)
    gen = VLLMGenerator(config, spec=get_spec("tiny-reasoner"), llm_class=FAKE[0], params_class=FAKE[1])
    try:
        requests = [chat("r0"), chat("r1"), chat("r2", stop=("<die>",)), chat("r3")]
        results = {r.request_id: r for r in gen.generate(requests)}
        assert results["r0"].error is None and results["r1"].error is None
        assert "died" in results["r2"].error and "died" in results["r3"].error
        # The next call uses the surviving replica only.
        again = {r.request_id: r for r in gen.generate([chat("s0"), chat("s1")])}
        assert all(r.error is None for r in again.values()) and len(again) == 2
    finally:
        gen.close()
