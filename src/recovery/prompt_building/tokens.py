"""How a continuation prompt is built at token level from a model's conventions (`recovery.models`).

A continuation prompt is the chat rendered with its generation prompt, then — for a reasoning model — the
think opener *only if the rendered template does not already end with it*, then the intervened reasoning
(the *prefill*) verbatim. A chat model (the intervention LLM, the judges) gets the rendered template and the
prefill alone: never an opener, so with an empty prefill the prompt ends with the template's own
generation prompt.
`build_prompt_ids` does this on token ids so that the template's special tokens are kept exactly and the
BOS token appears once; `build_prompt_text` gives the same prompt as a string for servers.

This module imports neither torch nor transformers; tokenizers are duck-typed
(``apply_chat_template``, ``encode``, ``decode``, ``bos_token``, ``bos_token_id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recovery.generation import GenerationRequest, Message
from recovery.models import ModelSpec


def _as_dicts(messages: Sequence[Message | Mapping[str, str]]) -> list[dict[str, str]]:
    out = []
    for message in messages:
        if isinstance(message, Message):
            out.append({"role": message.role, "content": message.content})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return out


def render_chat(tokenizer: Any, spec: ModelSpec, messages: Sequence[Message | Mapping[str, str]]) -> str:
    """The chat rendered with its generation prompt and the spec's system prompt (template text only).

    The system prompt is prepended as a system message unless the chat already starts with one. When the
    template drops system messages but injects the prompt itself (Phi-4-reasoning), the rendering without
    our message is used; when the prompt cannot be placed at all, `ValueError` is raised.
    """
    chat = _as_dicts(messages)
    kwargs = dict(spec.chat_template_kwargs)

    def render(msgs: list[dict[str, str]]) -> str:
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kwargs)

    if not spec.system_prompt or (chat and chat[0]["role"] == "system"):
        return render(chat)
    text = render([{"role": "system", "content": spec.system_prompt}, *chat])
    if spec.system_prompt in text:
        return text
    fallback = render(chat)
    if spec.system_prompt in fallback:  # the template injects its own default system prompt
        return fallback
    raise ValueError(
        f"{spec.name}: the chat template dropped the system prompt {spec.system_prompt[:40]!r}...; "
        "check the template or pass the system message yourself"
    )


def needs_opener(rendered: str, spec: ModelSpec) -> bool:
    """True for a reasoning model whose rendered prompt does not already end with its think opener."""
    return spec.reasoning and not rendered.rstrip().endswith(spec.think_open)


def _strip_leading_opener(prefill: str, spec: ModelSpec) -> str:
    # A prefill that carries its own opener (a trace stored with its tags) would otherwise open the block
    # twice; reasoning is by definition the text *after* the opener.
    stripped = prefill.lstrip()
    if stripped.startswith(spec.think_open):
        return stripped[len(spec.think_open) :].lstrip("\n")
    return prefill


def continuation_tail(rendered: str, spec: ModelSpec, prefill: str) -> str:
    """What follows the rendered template: the think opener when the template lacks it, then the prefill.

    The opener is ``spec.think_opener`` (tag + newline) for a prefill that starts with text, but the bare
    tag when the prefill starts with whitespace: reasoning extracted from a model that wrote its own tag
    (`recovery.segment.split_reasoning`) keeps the newline that followed it, so tag + prefill reproduces
    the model's bytes exactly. The same reasoning after a template that opens the block itself and ends with
    that newline (the later revision of the R1-distill template: ``<｜Assistant｜><think>\n``) drops the
    newline the template already wrote, so both revisions present the same text. A chat model's prefill is
    appended as it is.
    """
    if not spec.reasoning:
        return prefill
    prefill = _strip_leading_opener(prefill, spec)
    if not needs_opener(rendered, spec):
        after_tag = rendered[len(rendered.rstrip()) :]
        return prefill[len(after_tag) :] if after_tag and prefill.startswith(after_tag) else prefill
    opener = spec.think_open if prefill[:1].isspace() else spec.think_opener
    return opener + prefill


def build_prompt_text(
    tokenizer: Any, spec: ModelSpec, messages: Sequence[Message | Mapping[str, str]], prefill: str
) -> str:
    """The continuation prompt as text: template + opener (if the template lacks it) + prefill.

    For servers that take text; prefer `build_prompt_ids` where token prompts are accepted, because a
    server re-tokenizing this text may add a second BOS.
    """
    rendered = render_chat(tokenizer, spec, messages)
    return rendered + continuation_tail(rendered, spec, prefill)


def encode_tail(tokenizer: Any, head_ids: list[int], head_text: str, tail: str) -> list[int]:
    """Token ids for ``tail`` appended after ``head_ids`` (the ids of ``head_text``).

    The tail is encoded on its own, so the head keeps exactly its template tokens (a hard token boundary,
    as when a model generated the head). Byte-level BPE tokenizers (all nine paper models) encode a
    segment verbatim; if a tokenizer does not (SentencePiece prefix spaces), the tail is re-derived from
    encoding head + tail together.
    """
    if not tail:
        return []
    ids = list(tokenizer.encode(tail, add_special_tokens=False))
    if tokenizer.decode(ids) == tail:
        return ids
    joint = list(tokenizer.encode(head_text + tail, add_special_tokens=False))
    if joint[: len(head_ids)] == head_ids:
        return joint[len(head_ids) :]
    return ids


def _dedupe_bos(tokenizer: Any, ids: list[int]) -> list[int]:
    bos = getattr(tokenizer, "bos_token_id", None)
    while bos is not None and len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
        ids = ids[1:]
    return ids


def build_prompt_ids(
    tokenizer: Any, spec: ModelSpec, messages: Sequence[Message | Mapping[str, str]], prefill: str
) -> list[int]:
    """Token ids of the continuation prompt: chat template + think opener (only if missing) + prefill.

    The template text is encoded without adding special tokens (templates write their own BOS, e.g.
    ``{{bos_token}}``), so there is exactly one BOS; the opener and prefill are encoded after a hard
    boundary (see `encode_tail`).
    """
    rendered = render_chat(tokenizer, spec, messages)
    return continuation_ids(tokenizer, spec, rendered, encode_template(tokenizer, rendered), prefill)


def encode_template(tokenizer: Any, rendered: str) -> list[int]:
    """Token ids of a rendered chat template: its own text only, no special tokens added (the template writes
    its BOS itself)."""
    return list(tokenizer.encode(rendered, add_special_tokens=False))


def continuation_ids(tokenizer: Any, spec: ModelSpec, rendered: str, head_ids: list[int], prefill: str) -> list[int]:
    """`build_prompt_ids` from an already rendered template and its ids (``encode_template``): callers that
    build many prompts for one chat (the training-data renderers) render and encode it once."""
    tail = continuation_tail(rendered, spec, prefill)
    return _dedupe_bos(tokenizer, list(head_ids) + encode_tail(tokenizer, head_ids, rendered, tail))


def raw_prompt_ids(tokenizer: Any, prompt: str, prefill: str = "") -> list[int]:
    """Token ids for an already-templated ``prompt`` plus ``prefill``, used as is.

    The tokenizer's special tokens (BOS) are added unless the text already starts with the BOS string.
    """
    bos = getattr(tokenizer, "bos_token", None)
    add_special = not (bos and prompt.startswith(bos))
    head = list(tokenizer.encode(prompt, add_special_tokens=add_special))
    return _dedupe_bos(tokenizer, head + encode_tail(tokenizer, head, prompt, prefill))


def reference_prompt_text(tokenizer: Any, messages: Sequence[Message | Mapping[str, str]], prefill: str) -> str:
    """The authors' continuation prompt (`recovery.protocol`, part "prompts"): the chat template rendered with
    the messages exactly as given and its generation prompt, then the prefill appended as it is — no think
    opener, whatever the template (their ``VllmRunner._format_prompts``; the prefill is the reasoning as their
    restore step wrote it)."""
    rendered = tokenizer.apply_chat_template(_as_dicts(messages), tokenize=False, add_generation_prompt=True)
    return rendered + prefill


def reference_prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a reference prompt: the whole text tokenized at once with the tokenizer's special tokens, as
    vLLM's ``LLM.generate`` tokenizes a text prompt. A template that writes its own BOS (the R1 distills') so
    starts with two BOS tokens, as the authors' continuations did (vLLM issue 27486 describes the behaviour)."""
    return list(tokenizer.encode(text))


def request_prompt_ids(tokenizer: Any, spec: ModelSpec, request: GenerationRequest) -> list[int]:
    """The token ids a backend feeds the model for ``request``: its chat as its ``rendering`` renders it (the
    run's prompts object, `recovery.prompt_building.turns`; None: `build_prompt_ids`) or the raw prompt
    (`raw_prompt_ids`)."""
    if request.messages is None:
        return raw_prompt_ids(tokenizer, request.prompt or "", request.prefill)
    if request.rendering is None:
        return build_prompt_ids(tokenizer, spec, request.messages, request.prefill)
    return request.rendering.prompt_ids(tokenizer, spec, request.messages, request.prefill)


def request_prompt_text(tokenizer: Any, spec: ModelSpec, request: GenerationRequest) -> str:
    """The prompt of ``request`` as text, for servers that take text (see `request_prompt_ids`)."""
    if request.messages is None:
        return (request.prompt or "") + request.prefill
    if request.rendering is None:
        return build_prompt_text(tokenizer, spec, request.messages, request.prefill)
    return request.rendering.prompt_text(tokenizer, spec, request.messages, request.prefill)
