"""`OpenAICompatGenerator`: any OpenAI-compatible server (vLLM serve, SGLang, llama.cpp) through raw
``/v1/completions``, on the maintained ``openai`` client (``pip install 'recovery[server]'``).

The continuation prompt is built here with `recovery.models` and sent as token ids or text, so the
intervened reasoning is continued verbatim: a chat endpoint would re-template it and close the assistant
turn. Each request carries its own seed and asks for its ``n`` samples at once, so a server with prefix
caching prefills the chain once.

Servers differ (`recovery.backends.openai_probe`): before its first request the generator asks the server
what it accepts, unless its `ServerConfig` is already resolved (the pipeline probes once, before any work,
and hands the result to every replica). Against a server that returns one choice whatever ``n`` says
(``samples_per_request: 1``), a request for n samples is sent as n requests of one sample, sample i
seeded with ``item_seed(seed, "sample", i)``, and put back together as one result (failed if any part
failed). A reply with another number of choices than asked is a failed result, never a short one.

Requests run on one ``AsyncOpenAI`` client in a background event loop (`openai_loop.ClientLoop`), at most
``max_concurrency`` in flight. The client retries connection errors, timeouts, 408/409/429 and 5xx up to
``max_retries`` times, waiting what ``Retry-After`` says or else its exponential backoff; ``timeout_s``
bounds each wait on the server within one attempt. Whatever still fails becomes that request's result
with ``error`` set (the reason, and how many attempts were made), never an exception out of `generate`,
and each request yields exactly one result. `check_server` fails fast with a clear message when nothing
answers. Text after a stop string is cut, as OpenAI's API specifies (``transformers serve`` keeps the
stop string in the text).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from recovery.backends.openai_config import SDK_FIELDS, VERBATIM_SPECIAL_TOKENS, ServerConfig
from recovery.backends.openai_loop import ClientLoop, failure_reason
from recovery.backends.openai_probe import ServerError, probe_server
from recovery.backends.openai_samples import one_sample_each, sample_seed
from recovery.generation import GenerationRequest, GenerationResult, Sample
from recovery.models import ModelSpec, spec_for
from recovery.prompt_building import request_prompt_ids, request_prompt_text

log = logging.getLogger(__name__)


def completion_body(config: ServerConfig, prompt: list[int] | str, request: GenerationRequest) -> dict[str, Any]:
    """The JSON body of one ``/v1/completions`` call. ``top_k`` goes in only when set (servers read it as
    an extra parameter); stop strings only when given; the seed unless the server refuses seeds."""
    params = request.sampling
    body: dict[str, Any] = {
        "model": config.model,
        "prompt": prompt,
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        # A shared prompt + output window is applied here for token prompts; a text prompt's length is the
        # server's to count (its own max_model_len bounds the window).
        "max_tokens": request.new_token_budget(len(prompt)) if isinstance(prompt, list) else params.max_new_tokens,
    }
    if params.top_k is not None:
        body["top_k"] = params.top_k
    if params.seed is not None and config.send_seed:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    body.update(config.extra_body)
    return body


class OpenAICompatGenerator:
    """The generation protocol over an OpenAI-compatible completions endpoint.

    Pass a `ServerConfig`, or its fields as keywords (``base_url=..., model=...``). ``tokenizer`` is the
    model's HF tokenizer, a path to load one from, or None to load it from ``config.model``: prompts are
    built locally with it. Every use of the tokenizer happens in the thread calling `generate` (HF fast
    tokenizers are not safe to share between threads); only HTTP runs in the background loop.
    """

    name = "openai"
    concurrency = 1  # a stage that asks one request at a time keeps one in flight

    def __init__(
        self,
        config: ServerConfig | None = None,
        tokenizer: Any = None,
        *,
        spec: ModelSpec | None = None,
        reasoning: bool | None = None,
        **server: Any,
    ) -> None:
        config = config or ServerConfig(**server)
        if tokenizer is None or isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer or config.model)
        self.config = config
        self.tokenizer = tokenizer
        self.spec = spec or spec_for(config.model, tokenizer, reasoning=reasoning)
        self._loop = ClientLoop(config)

    def check_server(self) -> list[str]:
        """The model ids the server lists (`answers`); raises `ServerError` if the server lists other models
        than this one."""
        listed = self.answers()
        if listed and self.config.model not in listed:
            raise ServerError(f"server at {self.config.base_url} serves {listed}, not {self.config.model!r}")
        return listed

    def answers(self) -> list[str]:
        """The model ids the server lists; raises `ServerError` naming the URL, what was asked and how long it
        waited if nothing answers within ``probe_timeout_s`` (one attempt). A server that answers ``GET
        /models`` with an HTTP error is up: ``[]``."""
        openai = self._loop.openai
        wait = self.config.probe_timeout_s
        url = self.config.base_url.rstrip("/") + "/models"
        try:
            return self._loop.list_models(timeout_s=wait)
        except openai.APIStatusError:
            return []
        except Exception as exc:  # noqa: BLE001 — any other failure means the same thing to the user
            raise ServerError(
                f"no OpenAI-compatible server answers at {self.config.base_url}: GET /models, 1 attempt: "
                f"{failure_reason(exc, url=url, timeout_s=wait)} (probe_timeout_s: {wait:g}); start one (e.g. "
                f"`vllm serve {self.config.model} --port 8000`) or fix base_url"
            ) from exc

    def probe(self, *, needs_top_k: bool = False) -> ServerConfig:
        """Check that the server answers at all (`answers`), then ask it what it accepts and adopt the settings
        it needs (`openai_probe.probe_server`); returns the resolved config. Raises `ServerError` when the
        server cannot serve the run, each question bounded by ``probe_timeout_s``."""
        self.answers()
        self.config = probe_server(self.config, self._loop, self.tokenizer, self.spec, needs_top_k=needs_top_k)
        return self.config

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """One result per request, in completion order, at most ``max_concurrency`` requests in flight.

        A prompt is built just before its request is sent and a reply is read into a result when it is
        yielded, both in this thread. Closing the iterator early cancels the requests still in flight. An
        unresolved config is probed first (`probe`; `ServerError` if the server cannot serve the run).
        """
        if not self.config.resolved:
            self.probe()
        if self.config.samples_per_request == "1":
            return one_sample_each(self._send, requests)
        return self._send(requests)

    def _send(self, requests: Iterator[GenerationRequest] | Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        limit = self.config.max_concurrency
        slots = threading.BoundedSemaphore(limit)
        done: queue.SimpleQueue = queue.SimpleQueue()
        in_flight: set[Future] = set()
        lock = threading.Lock()

        def finished(future: Future, request: GenerationRequest, n_prompt: int) -> None:
            with lock:
                in_flight.discard(future)
            slots.release()
            done.put((request, n_prompt, future))

        def submit(request: GenerationRequest, body: dict[str, Any], n_prompt: int) -> None:
            kwargs = {key: body[key] for key in SDK_FIELDS if key in body}
            extra = {key: value for key, value in body.items() if key not in SDK_FIELDS}
            future = self._loop.submit_completion(kwargs, extra)
            with lock:
                in_flight.add(future)
            future.add_done_callback(lambda f: finished(f, request, n_prompt))

        outstanding = 0
        last: tuple[Any, list[int] | str, int] | None = None  # the parts of one request share its prompt
        try:
            for request in requests:
                try:
                    key = (request.messages, request.prompt, request.prefill, request.rendering)
                    if last is None or last[0] != key:
                        prompt = self.prompt(request)
                        n_prompt = len(prompt) if isinstance(prompt, list) else len(self.tokenizer.encode(prompt))
                        last = (key, prompt, n_prompt)
                    _, prompt, n_prompt = last
                    body = completion_body(self.config, prompt, request)
                except Exception as exc:  # noqa: BLE001 — one bad request must not stop the run
                    yield _failed(request, 0, f"prompt: {type(exc).__name__}: {exc}")
                    continue
                while not slots.acquire(blocking=False):
                    outstanding -= 1
                    yield self._result(*done.get())
                try:
                    submit(request, body, n_prompt)
                except Exception as exc:  # noqa: BLE001 — e.g. the loop was closed under us
                    slots.release()
                    yield _failed(request, n_prompt, f"not sent: {type(exc).__name__}: {exc}")
                    continue
                outstanding += 1
                while outstanding and not done.empty():  # hand back what is ready, keeping the queue short
                    outstanding -= 1
                    yield self._result(*done.get())
            while outstanding:
                outstanding -= 1
                yield self._result(*done.get())
        finally:
            with lock:
                pending = list(in_flight)
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the background loop and close the client's connections; a later `generate` starts anew."""
        self._loop.close()

    # -- one request -----------------------------------------------------------------------------------

    def prompt(self, request: GenerationRequest) -> list[int] | str:
        """The prompt sent for ``request``: token ids or text, per ``prompt_format``; text without its
        leading BOS when the server adds one (``strip_bos``)."""
        if self.config.prompt_format == "text":
            text = request_prompt_text(self.tokenizer, self.spec, request)
            bos = getattr(self.tokenizer, "bos_token", None)
            if self.config.strip_bos and bos and text.startswith(bos):
                text = text[len(bos) :]
            return text
        return request_prompt_ids(self.tokenizer, self.spec, request)

    def _result(self, request: GenerationRequest, n_prompt: int, future: Future) -> GenerationResult:
        """The result of one finished call: its samples, or its failure with the reason."""
        try:
            completion = future.result()
        except Exception as exc:  # noqa: BLE001 — every failure is this request's only
            reason = failure_reason(exc, url=self.config.completions_url, timeout_s=self.config.timeout_s)
            return _failed(request, n_prompt, reason)
        try:
            return self._to_result(request, completion, n_prompt)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            return _failed(request, n_prompt, f"malformed response: {type(exc).__name__}: {exc}")

    def _to_result(self, request: GenerationRequest, completion: Any, n_prompt: int) -> GenerationResult:
        choices = sorted(completion.choices or (), key=lambda c: c.index or 0)
        if len(choices) != request.sampling.n:
            return _failed(request, n_prompt, f"server returned {len(choices)} of {request.sampling.n} samples")
        usage = completion.usage
        samples = []
        for choice in choices:
            text = choice.text
            if not isinstance(text, str):
                raise TypeError(f"choice text is {type(text).__name__}, not str")
            token_ids = getattr(choice, "token_ids", None)  # vLLM's ``return_token_ids``
            if token_ids is not None:
                n_tokens = len(token_ids)
            elif len(choices) == 1 and usage is not None and usage.completion_tokens is not None:
                n_tokens = int(usage.completion_tokens)
            else:  # the server does not say per choice: count with the model's tokenizer
                n_tokens = len(self.tokenizer.encode(text, add_special_tokens=False))
            finish = {"stop": "stop", "length": "length"}.get(choice.finish_reason or "", "error")
            cut = _find_stop(text, request.sampling.stop)
            if cut >= 0:
                text, finish = text[:cut], "stop"
            samples.append(Sample(text=text, n_tokens=n_tokens, finish_reason=finish))
        prompt_tokens = int((usage.prompt_tokens if usage is not None else None) or n_prompt)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None)
        return GenerationResult(
            request_id=request.request_id,
            samples=tuple(samples),
            prompt_tokens=prompt_tokens,
            prefilled_tokens=None if cached is None else prompt_tokens - int(cached),
        )


def _failed(request: GenerationRequest, prompt_tokens: int, message: str) -> GenerationResult:
    return GenerationResult(request.request_id, samples=(), prompt_tokens=prompt_tokens, error=message)


def _find_stop(text: str, stops: Sequence[str]) -> int:
    """Index of the earliest occurrence of any stop string in ``text``, or -1."""
    hits = [i for i in (text.find(stop) for stop in stops if stop) if i >= 0]
    return min(hits) if hits else -1


__all__ = [
    "OpenAICompatGenerator",
    "ServerConfig",
    "ServerError",
    "VERBATIM_SPECIAL_TOKENS",
    "completion_body",
    "sample_seed",
]
