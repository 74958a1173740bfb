"""What an OpenAI-compatible server accepts, learned from a few one-token requests before any work.

Servers that implement ``/v1/completions`` differ in ways that change results or make every request fail:

- vLLM and SGLang take a prompt as token ids; ``transformers serve`` takes text only (HTTP 400) and
  tokenizes it *with* special tokens, so a prompt whose chat template writes the BOS gets a second one.
- vLLM returns ``n`` choices; ``transformers serve`` accepts ``n`` and returns one.
- Fields outside OpenAI's schema (``top_k``, ``skip_special_tokens``) are read by vLLM and refused by
  ``transformers serve`` (HTTP 422); ``seed`` may be honoured or refused.

`probe_server` asks the server each question once, with a short continuation-shaped prompt built by the
same code as real prompts, and returns the `ServerConfig` resolved for it: ``prompt_format`` and
``samples_per_request`` no longer ``auto``, ``strip_bos`` when the server adds the BOS that the text
already carries, and ``extra_body`` / ``send_seed`` reduced to what the server takes. A setting the run
needs and the server cannot honour (token prompts or ``n`` asked for explicitly, ``top_k``, a ``seed``
unless ``require_seed`` is off, think tags that are special tokens of a server that strips them) raises
`ServerError` with the server's own reason, before any work. `settings_record` is the part of the
resolved config that changes results: a run records it and refuses to resume under a different one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from recovery.backends.openai_config import SDK_FIELDS, ServerConfig
from recovery.backends.openai_loop import ClientLoop, failure_reason, import_openai, result_within
from recovery.generation import Message
from recovery.models import ModelSpec
from recovery.prompt_building import build_prompt_ids, build_prompt_text

log = logging.getLogger(__name__)

# The probe's chat: short, and shaped like a continuation (template, think opener, reasoning prefill).
PROBE_MESSAGES = (Message("user", "What is 2 + 3?"),)
PROBE_PREFILL = "Step 1: 2 + 3 = 5."
PROBE_SEED = 12345
# Status codes the client retries (busy, loading) are failures of the probe, never a refusal of a field.
_RETRIED = {408, 409, 429}


class ServerError(RuntimeError):
    """The server could not be reached, does not serve the model, or cannot honour what the run needs."""


@dataclasses.dataclass(frozen=True)
class Reply:
    """What one probe request got: the number of choices and the prompt tokens the server counted (None when
    it does not say), or the server's refusal (``refused``: its HTTP status and words)."""

    choices: int = 0
    prompt_tokens: int | None = None
    refused: str | None = None
    texts: tuple[str, ...] = ()


class Prober:
    """Sends one-token probe requests to ``config``'s server over ``loop`` and reads their replies."""

    def __init__(self, config: ServerConfig, loop: ClientLoop) -> None:
        self.config = config
        self.loop = loop
        self.url = config.completions_url

    def ask(self, prompt: list[int] | str, **fields: Any) -> Reply:
        """One request for a single token of ``prompt`` with ``fields`` added. A 4xx answer other than
        busy or timeout is a refusal of the request; anything else (no server, 5xx after retries, no answer
        within ``probe_timeout_s``, retries included) raises `ServerError` naming the URL."""
        openai = import_openai()
        body = {"model": self.config.model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0, **fields}
        kwargs = {key: body[key] for key in SDK_FIELDS if key in body}
        extra = {key: value for key, value in body.items() if key not in SDK_FIELDS}
        wait = self.config.probe_timeout_s
        try:
            future = self.loop.submit_completion(kwargs, extra, timeout_s=wait)
            completion = result_within(future, wait)
        except openai.APIStatusError as exc:
            reason = failure_reason(exc, url=self.url)
            if 400 <= exc.status_code < 500 and exc.status_code not in _RETRIED:
                return Reply(refused=reason)
            raise ServerError(reason) from exc
        except Exception as exc:  # noqa: BLE001 — no answer at all: nothing can run
            reason = failure_reason(exc, url=self.url, timeout_s=wait)
            raise ServerError(f"{reason} to a one-token probe request (probe_timeout_s: {wait:g})") from exc
        usage = getattr(completion, "usage", None)
        counted = getattr(usage, "prompt_tokens", None)
        texts = tuple(str(getattr(choice, "text", "")) for choice in completion.choices or ())
        return Reply(len(texts), None if counted is None else int(counted), texts=texts)


def probe_server(
    config: ServerConfig, loop: ClientLoop, tokenizer: Any, spec: ModelSpec, *, needs_top_k: bool = False
) -> ServerConfig:
    """``config`` resolved for the server it names (see the module docstring); raises `ServerError` naming
    the server and its reason when the server cannot serve the run."""
    probe = Prober(config, loop)
    where = f"the server at {probe.url}"
    ids = build_prompt_ids(tokenizer, spec, PROBE_MESSAGES, PROBE_PREFILL)
    text = build_prompt_text(tokenizer, spec, PROBE_MESSAGES, PROBE_PREFILL)
    plain = probe.ask(text)
    if plain.refused:
        raise ServerError(f"{where} does not complete a text prompt for model {config.model!r}: {plain.refused}")

    prompt_format, prompt, strip_bos = "text", text, False
    if config.prompt_format in ("auto", "tokens"):
        tokens = probe.ask(ids)
        if tokens.refused is None:
            _check_count(where, tokens.prompt_tokens, len(ids), "the token-id prompt")
            prompt_format, prompt = "tokens", ids
        elif config.prompt_format == "tokens":
            raise ServerError(f"{where} refuses token-id prompts (prompt_format: tokens): {tokens.refused}")
    if prompt_format == "text":
        strip_bos = _server_adds_bos(probe, where, tokenizer, text, plain.prompt_tokens, len(ids))
        prompt = text[len(tokenizer.bos_token) :] if strip_bos else text

    send_seed = True
    seeded = probe.ask(prompt, seed=PROBE_SEED)
    if seeded.refused:
        if config.require_seed:
            raise ServerError(
                f"{where} refuses a request seed, so the run could not be reproduced: {seeded.refused} "
                "(set require_seed: false on the model to run unseeded)"
            )
        send_seed = False

    extra_body = {}
    for key, value in config.extra_body.items():
        reply = probe.ask(prompt, **{key: value})
        if reply.refused is None:
            extra_body[key] = value
        elif key == "skip_special_tokens" and value is False:
            _check_tags_survive(where, tokenizer, spec, reply.refused)

    if needs_top_k:
        reply = probe.ask(prompt, top_k=20)
        if reply.refused:
            raise ServerError(f"{where} refuses top_k, which the run's decoding sets: {reply.refused}")

    extra_body.update(_sampling_fields(probe, where, prompt, send_seed))

    samples = "1"
    if config.samples_per_request in ("auto", "n"):
        seed = {"seed": PROBE_SEED} if send_seed else {}
        reply = probe.ask(prompt, n=2, temperature=1.0, top_p=1.0, **seed)
        if reply.refused is None and reply.choices == 2:
            samples = "n"
        elif config.samples_per_request == "n":
            why = reply.refused or f"it returned {reply.choices} of 2 choices for n=2"
            raise ServerError(f"{where} does not return n samples per request (samples_per_request: n): {why}")

    return dataclasses.replace(
        config,
        prompt_format=prompt_format,
        samples_per_request=samples,
        strip_bos=strip_bos,
        send_seed=send_seed,
        extra_body=extra_body,
    )


# What makes ``transformers serve`` sample for a model whose generation config says ``do_sample: false`` (a
# GGUF carries none): it reads this field as generation settings and otherwise ignores the temperature.
SAMPLE_ANYWAY = {"generation_config": '{"do_sample": true}'}
SAMPLING_PROBES = 3


def _sampling_fields(probe: Prober, where: str, prompt: list[int] | str, send_seed: bool) -> dict[str, Any]:
    """The extra fields the server needs to sample at all: none when two of a few differently seeded
    requests at temperature 1 differ, else `SAMPLE_ANYWAY` when it accepts that and then samples; raises otherwise (a
    server that decodes greedily whatever the temperature would make every continuation the same)."""

    def texts(**extra: Any) -> set[tuple[str, ...]] | str:
        seen = set()
        for i in range(SAMPLING_PROBES):
            seed = {"seed": PROBE_SEED + i} if send_seed else {}
            reply = probe.ask(prompt, max_tokens=8, temperature=1.0, top_p=1.0, **seed, **extra)
            if reply.refused:
                return reply.refused
            seen.add(reply.texts)
            if len(seen) > 1:
                break
        return seen

    if len(texts()) > 1:
        return {}
    anyway = texts(**SAMPLE_ANYWAY)
    if not isinstance(anyway, str) and len(anyway) > 1:
        return dict(SAMPLE_ANYWAY)
    raise ServerError(
        f"{where} returns the same text for {SAMPLING_PROBES} requests at temperature 1 with different seeds: it "
        "decodes greedily whatever the temperature (e.g. transformers serve for a model whose generation config "
        "does not enable sampling), so it cannot sample the run's continuations"
    )


def _check_count(where: str, counted: int | None, expected: int, what: str) -> None:
    if counted is not None and counted != expected:
        raise ServerError(
            f"{where} counts {counted} tokens in {what}, where the model's tokenizer has {expected}: "
            "it does not serve the model this tokenizer belongs to"
        )


def _server_adds_bos(probe: Prober, where: str, tokenizer: Any, text: str, counted: int | None, ids: int) -> bool:
    """Whether text prompts must be sent without their leading BOS text: the server tokenizes with special
    tokens and so adds the BOS itself. Decided from the prompt tokens the server counted for the probe text
    against this tokenizer's count of it (when the server does not report them, from whether this tokenizer
    adds a BOS), and checked by sending the text without it. A count that no BOS explains means the server
    tokenizes with another tokenizer: refused. ``ids``: the length of the probe's token-mode prompt, which
    the text should match (a merge across the template / reasoning boundary is only logged)."""
    bos = getattr(tokenizer, "bos_token", None)
    starts_with_bos = bool(bos) and text.startswith(bos)
    if counted is None:
        bos_id = getattr(tokenizer, "bos_token_id", None)
        return starts_with_bos and bos_id is not None and list(tokenizer("x").input_ids)[:1] == [bos_id]
    local = len(tokenizer.encode(text, add_special_tokens=False))
    strip = False
    if counted == local + 1 and starts_with_bos:
        stripped = probe.ask(text[len(bos) :])
        if stripped.refused is None:
            _check_count(where, stripped.prompt_tokens, local, "the prompt text without its BOS")
            counted, strip = local, True
    if counted == local + 1:
        log.warning("%s adds a BOS to text prompts that the chat template does not write", where)
    else:
        _check_count(where, counted, local, "the prompt text")
    if local != ids:
        log.warning(
            "%s: the probe prompt is %d tokens as text, %d as token ids (a merge at a boundary)", where, local, ids
        )
    return strip


def _check_tags_survive(where: str, tokenizer: Any, spec: ModelSpec, refused: str) -> None:
    """A server that refuses ``skip_special_tokens: false`` decodes without special tokens; raise when the
    model's think tags are special tokens, which it would strip from every continuation."""
    special = _special_tokens(tokenizer)
    lost = [tag for tag in (spec.think_open, spec.think_close) if spec.reasoning and tag in special]
    if lost:
        raise ServerError(
            f"{where} refuses skip_special_tokens ({refused}), so it strips special tokens from its replies, "
            f"and the think tags {lost} are special tokens of the model's tokenizer"
        )


def _special_tokens(tokenizer: Any) -> set[str]:
    names = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    names.update(str(token) for token in decoder.values() if getattr(token, "special", False))
    return names


# The fields of a resolved `ServerConfig` that change what a run generates.
RESULT_FIELDS: Sequence[str] = ("prompt_format", "samples_per_request", "strip_bos", "send_seed", "extra_body")


def settings_record(config: ServerConfig) -> dict[str, Any]:
    """The results-relevant settings of a resolved ``config``, as plain JSON values."""
    record = {name: getattr(config, name) for name in RESULT_FIELDS}
    record["extra_body"] = dict(sorted(dict(record["extra_body"]).items()))
    return record


def resolved_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of `ServerConfig` that reproduce a `settings_record`."""
    return {name: record[name] for name in RESULT_FIELDS if name in record}


__all__ = ["PROBE_MESSAGES", "PROBE_PREFILL", "ServerError", "probe_server", "resolved_fields", "settings_record"]
