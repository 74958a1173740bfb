"""The generation protocol over an already-built ``vllm.LLM``: the vLLM backend's form for an engine that lives
in this process already (TRL's colocated engine during training; `recovery.backends.registry`, ``live``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from recovery.backends.vllm import VLLMConfig, build_inputs, to_result
from recovery.generation import GenerationRequest, GenerationResult


class VLLMEngineGenerator:
    """The generation protocol over an already-built ``vllm.LLM`` (TRL's colocated engine).

    Prompts are built at token level with `recovery.models` (as `recovery.backends.vllm` does), one
    vLLM request per `GenerationRequest` with ``n`` samples and the request's seed. ``params_class``
    defaults to ``vllm.SamplingParams`` (a stand-in can be passed in tests).
    """

    name = "vllm-colocate"
    concurrency = 1  # a stage that asks one request at a time keeps one in flight

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        spec: Any,
        *,
        seed: int = 0,
        max_model_len: int | None = None,
        params_class: Any = None,
    ) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.spec = spec
        self.seed = seed
        self.max_model_len = max_model_len
        self.params_class = params_class

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        config = VLLMConfig(model="colocated", seed=self.seed, max_model_len=self.max_model_len)
        ready, failed = build_inputs(self.tokenizer, self.spec, requests, config)
        yield from failed
        if not ready:
            return
        params_class = self.params_class
        if params_class is None:
            from vllm import SamplingParams as params_class
        params = [params_class(**item.sampling) for item in ready]
        outputs = self.llm.generate([item.prompt for item in ready], params, use_tqdm=False)
        eos = getattr(self.tokenizer, "eos_token", None) or ""
        for item, output in zip(ready, outputs, strict=True):
            yield to_result(item.request_id, output, eos)

    def close(self) -> None:
        """The engine belongs to the trainer: nothing to release."""


__all__ = ["VLLMEngineGenerator"]
