"""Shared pieces of the real-model tests: a recorder around the real SmolLM2 backend, and helpers that read
the real chat template. Imported as a top-level module (pytest puts this folder on ``sys.path``).

Nothing here stands in for the model: `RecordingGenerator` passes every request to the real `HFGenerator`
and keeps, beside it, the token ids that backend fed the model and the result it returned, so a test can
check what reached the model (prompt, decoding) and what came back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from recovery.generation import GenerationRequest, GenerationResult

# The system prompt SmolLM2's template injects into a chat that has none (checked on the real template in
# test_smollm2_loading.py); a chat with its own system message must not get it.
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@dataclass(frozen=True)
class Call:
    """One request as the real backend saw it: its prompt ids and text, and its result."""

    request: GenerationRequest
    prompt_ids: tuple[int, ...]
    prompt_text: str
    result: GenerationResult

    @property
    def reply(self) -> str | None:
        return self.result.samples[0].text if self.result.samples else None


class RecordingGenerator:
    """A `recovery.backends.Generator` that forwards to a real `HFGenerator` and records every call."""

    concurrency = 1  # the Generator protocol: one request in flight

    name = "hf"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[Call] = []
        self.seconds = 0.0

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        by_id = {r.request_id: r for r in requests}
        start = time.perf_counter()
        for result in self.inner.generate(requests):
            request = by_id[result.request_id]
            ids = tuple(self.inner.prompt_ids(request))
            text = self.inner.tokenizer.decode(list(ids), skip_special_tokens=False)
            self.calls.append(Call(request, ids, text, result))
            yield result
        self.seconds += time.perf_counter() - start

    def close(self) -> None:
        self.inner.close()


def generation_prompt(tokenizer: Any) -> str:
    """The template's own generation prompt: what ``add_generation_prompt=True`` appends to a chat."""
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    with_prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    without = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
    assert with_prompt.startswith(without) and len(with_prompt) > len(without)
    return with_prompt[len(without) :]


def rendered(tokenizer: Any, request: GenerationRequest, *, tokenize: bool = False) -> Any:
    """The real template's rendering of ``request``'s chat with its generation prompt, nothing added: its
    text, or with ``tokenize`` the token ids the tokenizer itself makes of it."""
    chat = [{"role": m.role, "content": m.content} for m in request.messages or ()]
    out = tokenizer.apply_chat_template(chat, tokenize=tokenize, add_generation_prompt=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out) if tokenize else out


def assert_plain_chat_prompt(call: Call, tokenizer: Any) -> None:
    """The prompt the model saw is the real template's rendering of the chat, ending with its generation
    prompt: no think opener, no prefill, and the chat's own system message instead of the template's default."""
    assert call.request.prefill == ""
    assert call.request.messages and call.request.messages[0].role == "system"
    assert call.prompt_text == rendered(tokenizer, call.request)
    # Token for token too: the template's markers are its special tokens, not their characters spelled out.
    assert list(call.prompt_ids) == rendered(tokenizer, call.request, tokenize=True)
    assert call.prompt_text.endswith(generation_prompt(tokenizer))
    assert "<think>" not in call.prompt_text and "<thought>" not in call.prompt_text
    assert SMOLLM2_DEFAULT_SYSTEM not in call.prompt_text
