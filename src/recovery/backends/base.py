"""The generation protocol every backend implements (HF transformers, vLLM, OpenAI-compatible servers).

A `GenerationRequest` is a chat (or an already-templated prompt) plus an assistant *prefill* — the
intervened reasoning the model must continue — and sampling parameters with ``n`` samples. A backend
returns one `GenerationResult` per request with ``n`` `Sample` texts (the continuation only, without the
prompt or prefill), their token counts and finish reasons.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Protocol, runtime_checkable

from recovery.interventions.base import Decoding, GeneratedText, Message


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Decoding for one request. ``temperature == 0`` means greedy; ``top_k=None`` means disabled.

    The default is the paper's continuation setting (Table 15): n=8, T=0.6, top_p=0.95.
    """

    n: int = 8
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int | None = None
    seed: int | None = None
    max_new_tokens: int = 32768
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be ≥ 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be ≥ 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be ≥ 1, got {self.max_new_tokens}")

    @classmethod
    def from_decoding(cls, decoding: Decoding, n: int = 1) -> SamplingParams:
        """The sampling parameters for an intervention LLM call (`recovery.interventions.base.Decoding`)."""
        return cls(
            n=n,
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            top_k=decoding.top_k,
            seed=decoding.seed,
            max_new_tokens=decoding.max_new_tokens,
        )


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One prompt to continue. Exactly one of ``messages`` (chat, templated by the backend) and ``prompt``
    (raw text, used as is) is set; ``prefill`` is appended after the assistant turn opens (and after the
    think opener when the template does not emit it)."""

    request_id: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    messages: tuple[Message, ...] | None = None
    prompt: str | None = None
    prefill: str = ""

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError(f"request {self.request_id}: set exactly one of messages and prompt")


@dataclass(frozen=True, slots=True)
class Sample:
    """One generated continuation."""

    text: str
    n_tokens: int
    finish_reason: str  # "stop" (EOS or stop string), "length" (hit max_new_tokens), or "error"


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """The n samples for one request. ``prompt_tokens`` is the prompt length; ``prefilled_tokens`` is how
    many prompt tokens the backend actually ran through the model (less with prefix sharing/caching,
    when the backend can tell)."""

    request_id: str
    samples: tuple[Sample, ...]
    prompt_tokens: int
    prefilled_tokens: int | None = None
    error: str | None = None


# A quantisation tag at the end of a GGUF file's stem: ".Q4_1", "-Q4_K_M", "-IQ3_XS", ".F16", "-BF16".
_GGUF_QUANT_TAG = re.compile(r"[.-](?:I?Q\d[A-Z0-9_]*|F16|F32|BF16)$", re.IGNORECASE)


def gguf_model_name(gguf_file: str) -> str:
    """The model a GGUF file holds, from its name (extension and quantisation tag removed), for looking up
    its conventions: the folder that holds a GGUF rarely names the model, the file usually does.

    >>> gguf_model_name("SmolLM2-135M-Instruct.Q4_1.gguf"), gguf_model_name("/m/Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    ('SmolLM2-135M-Instruct', 'Qwen2.5-7B-Instruct')
    """
    stem = PurePath(gguf_file).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    return _GGUF_QUANT_TAG.sub("", stem)


@runtime_checkable
class Generator(Protocol):
    """A generation backend. Results may arrive in any order; each carries its ``request_id``."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]: ...

    def close(self) -> None: ...


class ChatTextGenerator:
    """Adapts a `Generator` to the interventions' `TextGenerator` protocol (messages + decoding → text)."""

    def __init__(self, backend: Generator) -> None:
        self.backend = backend
        self._counter = 0

    def __call__(self, messages: Sequence[Message], decoding: Decoding) -> str:
        self._counter += 1
        request = GenerationRequest(
            request_id=f"intervention-{self._counter}",
            sampling=SamplingParams.from_decoding(decoding),
            messages=tuple(messages),
        )
        (result,) = list(self.backend.generate([request]))
        if result.error or not result.samples:
            raise RuntimeError(f"generation failed: {result.error or 'no samples'}")
        sample = result.samples[0]
        return GeneratedText(sample.text, truncated=sample.finish_reason == "length")


def batched(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of at most ``size`` items."""
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
