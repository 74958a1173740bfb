"""The generation building blocks every layer shares: chat messages, decoding, requests and results, and the
two generator protocols.

Two shapes of generation meet here. A `TextGenerator` turns chat messages and a `Decoding` into one reply
(`GeneratedText`): what an LLM-backed intervention or a judge asks for. A `Generator` is a batched backend
(HF transformers, vLLM, an OpenAI-compatible server): `GenerationRequest` in, `GenerationResult` with ``n``
`Sample` texts out, results in any order. `ChatTextGenerator` adapts the second to the first. This module
imports nothing else from the package, so every layer above can use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


def check_decoding(temperature: float | None, top_p: float | None, top_k: int | None, *, where: str = "") -> None:
    """Decoding values a backend can honour (None: not set); `ValueError` naming the key otherwise."""
    if temperature is not None and not temperature >= 0:
        raise ValueError(f"{where}temperature must be ≥ 0 (0 = greedy), got {temperature}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"{where}top_p must lie in (0, 1], got {top_p}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"{where}top_k must be ≥ 1 (or unset for no top-k), got {top_k}")


def check_sampling(n: int, max_new_tokens: int, *, where: str = "") -> None:
    """A sample count and a token budget a backend can honour; `ValueError` naming the key otherwise."""
    if n < 1:
        raise ValueError(f"{where}n must be ≥ 1, got {n}")
    if max_new_tokens < 1:
        raise ValueError(f"{where}max_new_tokens must be ≥ 1, got {max_new_tokens}")


@dataclass(frozen=True, slots=True)
class Decoding:
    """Decoding parameters for one chat reply (paper Table 15). ``temperature == 0`` means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int | None = None
    max_new_tokens: int = 1024


class GeneratedText(str):
    """A reply that says whether it was cut at ``max_new_tokens`` (``truncated``). It is a plain `str` to
    every reader; an intervention that rewrites the whole prefix refuses a truncated one."""

    truncated: bool = False

    def __new__(cls, text: str, *, truncated: bool = False) -> GeneratedText:
        reply = super().__new__(cls, text)
        reply.truncated = truncated
        return reply


@runtime_checkable
class TextGenerator(Protocol):
    """Anything that turns chat messages + decoding parameters into one reply text.

    Backends (through `ChatTextGenerator`) and test doubles implement this. A `GeneratedText` reply also
    says whether it was truncated.
    """

    def __call__(self, messages: Sequence[Message], decoding: Decoding) -> str: ...


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Decoding for one batched request. ``temperature == 0`` means greedy; ``top_k=None`` means disabled.

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
        check_sampling(self.n, self.max_new_tokens)
        check_decoding(self.temperature, self.top_p, self.top_k)

    @classmethod
    def from_decoding(cls, decoding: Decoding, n: int = 1) -> SamplingParams:
        """The sampling parameters of one chat reply (a `Decoding`: each of its fields is one of ours), as a
        batched request takes them."""
        return cls(n=n, **asdict(decoding))


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
    # How the chat and prefill become the prompt: the run's prompts object (`recovery.prompt_building.turns`,
    # e.g. the authors': the template with the messages as given, the prefill appended as text, tokenized whole),
    # with ``prompt_ids`` and ``prompt_text``; None: the project's (`recovery.prompt_building.build_prompt_ids`).
    rendering: Any = None
    # Prompt and output share this many tokens (the authors' 32,768-token window); None: no shared limit.
    max_total_tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError(f"request {self.request_id}: set exactly one of messages and prompt")

    def new_token_budget(self, prompt_tokens: int) -> int:
        """The new tokens this request may generate after a prompt of ``prompt_tokens`` tokens; `ValueError`
        when the prompt leaves no room in the shared window (every backend then fails the request)."""
        if self.max_total_tokens is None:
            return self.sampling.max_new_tokens
        room = self.max_total_tokens - prompt_tokens
        if room < 1:
            raise ValueError(f"prompt of {prompt_tokens} tokens leaves no room in {self.max_total_tokens} tokens")
        return min(self.sampling.max_new_tokens, room)


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


class ThinkTags(Protocol):
    """What a stage reads of a backend's model conventions (`recovery.models.ModelSpec` has these and more):
    the tags that open and close the model's reasoning."""

    think_open: str
    think_close: str


@runtime_checkable
class Generator(Protocol):
    """A generation backend. Results may arrive in any order; each carries its ``request_id``.

    ``spec`` is the conventions the backend builds prompts with (a `recovery.models.ModelSpec`): stages read
    its think tags from it. ``concurrency`` is how many requests a stage that asks one at a time may keep in
    flight (1 for a local backend; a Ray pool's replicas).
    """

    name: str
    spec: ThinkTags
    concurrency: int

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]: ...

    def close(self) -> None: ...


class ChatTextGenerator:
    """Adapts a `Generator` to the `TextGenerator` protocol (messages + decoding → one reply)."""

    def __init__(self, backend: Generator) -> None:
        self.backend = backend
        self._numbers = itertools.count(1)  # thread-safe: a stage may call from several threads

    def __call__(self, messages: Sequence[Message], decoding: Decoding) -> str:
        request = GenerationRequest(
            request_id=f"intervention-{next(self._numbers)}",
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
