"""`OpenAICompatGenerator`: any OpenAI-compatible server (vLLM serve, SGLang, llama.cpp) through raw
``/v1/completions``.

The continuation prompt is built here with `recovery.models` and sent as token ids (default) or text, so
the intervened reasoning is continued verbatim: a chat endpoint would re-template it and close the
assistant turn. Requests run on a bounded thread pool; connection errors, timeouts, 429 and 5xx are
retried with exponential backoff (and ``Retry-After`` when given); anything else, or retries used up,
yields a result with ``error`` set instead of stopping the run. `check_server` fails fast with a clear
message when nothing answers. Only the standard library is used for HTTP.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from recovery.generation import GenerationRequest, GenerationResult, Sample
from recovery.models import ModelSpec, spec_for
from recovery.prompt_building import build_prompt_ids, build_prompt_text, raw_prompt_ids

log = logging.getLogger(__name__)

# vLLM / SGLang options that keep think tags and other special tokens verbatim in the returned text.
VERBATIM_SPECIAL_TOKENS: Mapping[str, Any] = {
    "skip_special_tokens": False,
    "spaces_between_special_tokens": False,
}


class ServerError(RuntimeError):
    """The server could not be reached or refused the request."""


@dataclass(frozen=True)
class ServerConfig:
    """Where the server is and how to talk to it.

    ``base_url`` ends with ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``). ``prompt_format`` is ``"tokens"``
    (ids built locally: exact, one BOS) or ``"text"``. ``extra_body`` is merged into every request body.
    """

    base_url: str
    model: str
    api_key: str | None = None
    max_concurrency: int = 16
    timeout_s: float = 600.0
    max_retries: int = 5
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    prompt_format: str = "tokens"
    extra_body: Mapping[str, Any] = field(default_factory=lambda: dict(VERBATIM_SPECIAL_TOKENS))

    def __post_init__(self) -> None:
        if self.prompt_format not in ("tokens", "text"):
            raise ValueError(f"prompt_format must be 'tokens' or 'text', got {self.prompt_format!r}")
        if self.max_concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("max_concurrency ≥ 1, max_retries ≥ 0 and timeout_s > 0 are required")

    @property
    def completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/completions"


def completion_body(config: ServerConfig, prompt: list[int] | str, request: GenerationRequest) -> dict[str, Any]:
    """The JSON body of one ``/v1/completions`` call. ``top_k`` goes in only when set (servers read it as
    an extra parameter); stop strings only when given."""
    params = request.sampling
    body: dict[str, Any] = {
        "model": config.model,
        "prompt": prompt,
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
    }
    if params.top_k is not None:
        body["top_k"] = params.top_k
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    body.update(config.extra_body)
    return body


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAICompatGenerator:
    """The generation protocol over an OpenAI-compatible completions endpoint.

    Pass a `ServerConfig`, or its fields as keywords (``base_url=..., model=...``). ``tokenizer`` is the
    model's HF tokenizer, a path to load one from, or None to load it from ``config.model``: prompts are
    built locally with it.
    """

    name = "openai"

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
        # A local server must not be reached through an HTTP proxy set in the environment.
        host = urllib.parse.urlsplit(config.base_url).hostname or ""
        local = host in ("localhost", "::1") or host.startswith("127.")
        handlers = [urllib.request.ProxyHandler({})] if local else []
        self._opener = urllib.request.build_opener(*handlers)
        self._tokenizer_lock = threading.Lock()

    def check_server(self) -> list[str]:
        """The model ids the server lists; raises `ServerError` if it does not answer or lacks the model."""
        url = self.config.base_url.rstrip("/") + "/models"
        try:
            with self._opener.open(self._http_request(url), timeout=min(self.config.timeout_s, 10)) as resp:
                listed = [m.get("id") for m in json.load(resp).get("data", [])]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServerError(
                f"no OpenAI-compatible server answers at {self.config.base_url} ({_reason(exc)}); start one "
                f"(e.g. `vllm serve {self.config.model} --port 8000`) or fix base_url"
            ) from exc
        if listed and self.config.model not in listed:
            raise ServerError(f"server at {self.config.base_url} serves {listed}, not {self.config.model!r}")
        return listed

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """Results as they complete, at most ``max_concurrency`` requests in flight.

        Prompts are built here, in the calling thread, before any request is sent: HF fast tokenizers
        are not safe to call from several threads at once ("Already borrowed").
        """
        prepared = []
        for request in requests:
            try:
                prompt = self.prompt(request)
                n_prompt = len(prompt) if isinstance(prompt, list) else len(self.tokenizer.encode(prompt))
            except Exception as exc:  # noqa: BLE001 — one bad request must not stop the run
                yield _failed(request, 0, f"prompt: {type(exc).__name__}: {exc}")
                continue
            prepared.append((request, prompt, n_prompt))
        with ThreadPoolExecutor(max_workers=self.config.max_concurrency, thread_name_prefix="openai") as pool:
            futures = [pool.submit(self._one, *item) for item in prepared]
            for future in as_completed(futures):
                yield future.result()

    def close(self) -> None:
        """Nothing to release: each call uses its own connection."""

    # -- one request -----------------------------------------------------------------------------------

    def prompt(self, request: GenerationRequest) -> list[int] | str:
        """The prompt sent for ``request``: token ids or text, per ``prompt_format``."""
        if self.config.prompt_format == "text":
            if request.messages is not None:
                return build_prompt_text(self.tokenizer, self.spec, request.messages, request.prefill)
            return (request.prompt or "") + request.prefill
        if request.messages is not None:
            return build_prompt_ids(self.tokenizer, self.spec, request.messages, request.prefill)
        return raw_prompt_ids(self.tokenizer, request.prompt or "", request.prefill)

    def _one(self, request: GenerationRequest, prompt: list[int] | str, n_prompt: int) -> GenerationResult:
        body = completion_body(self.config, prompt, request)
        try:
            response = self._post_with_retries(body)
        except ServerError as exc:
            return _failed(request, n_prompt, str(exc))
        except Exception as exc:  # noqa: BLE001 — anything unexpected is this request's failure only
            return _failed(request, n_prompt, f"{type(exc).__name__}: {exc}")
        try:
            return self._to_result(request, response, n_prompt)
        except (KeyError, TypeError, ValueError) as exc:
            return _failed(request, n_prompt, f"malformed response: {type(exc).__name__}: {exc}")

    def _post_with_retries(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.config.max_retries + 1):
            try:
                return self._post(data)
            except _Retryable as exc:
                last = str(exc)
                if attempt == self.config.max_retries:
                    break
                delay = min(self.config.backoff_max_s, self.config.backoff_s * 2**attempt)
                delay = exc.retry_after if exc.retry_after is not None else delay * (1 + 0.25 * random.random())
                log.info("retrying in %.2fs after: %s", delay, last)
                time.sleep(min(delay, self.config.backoff_max_s))
        raise ServerError(f"gave up after {self.config.max_retries + 1} attempts: {last}")

    def _post(self, data: bytes) -> dict[str, Any]:
        request = self._http_request(self.config.completions_url, data)
        try:
            with self._opener.open(request, timeout=self.config.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code}: {detail}", _retry_after(exc.headers)) from exc
            raise ServerError(f"HTTP {exc.code} from {self.config.completions_url}: {detail}") from exc
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
                url, limit = self.config.completions_url, self.config.timeout_s
                message = f"no answer from {url} within {limit}s (timed out)"
            else:
                message = f"cannot reach {self.config.completions_url}: {_reason(exc)}"
            raise _Retryable(message) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ServerError(f"invalid JSON from {self.config.completions_url}: {raw[:200]!r}") from exc

    def _http_request(self, url: str, data: bytes | None = None) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")

    def _to_result(self, request: GenerationRequest, response: dict[str, Any], n_prompt: int) -> GenerationResult:
        choices = sorted(response["choices"], key=lambda c: c.get("index", 0))
        usage = response.get("usage") or {}
        samples = []
        for choice in choices:
            text = choice["text"]
            if choice.get("token_ids") is not None:
                n_tokens = len(choice["token_ids"])
            elif len(choices) == 1 and usage.get("completion_tokens") is not None:
                n_tokens = int(usage["completion_tokens"])
            else:  # the server does not say per choice: count with the model's tokenizer
                with self._tokenizer_lock:
                    n_tokens = len(self.tokenizer.encode(text, add_special_tokens=False))
            finish = {"stop": "stop", "length": "length"}.get(choice.get("finish_reason") or "", "error")
            samples.append(Sample(text=text, n_tokens=n_tokens, finish_reason=finish))
        prompt_tokens = int(usage.get("prompt_tokens") or n_prompt)
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return GenerationResult(
            request_id=request.request_id,
            samples=tuple(samples),
            prompt_tokens=prompt_tokens,
            prefilled_tokens=None if cached is None else prompt_tokens - int(cached),
        )


def _failed(request: GenerationRequest, prompt_tokens: int, message: str) -> GenerationResult:
    return GenerationResult(request.request_id, samples=(), prompt_tokens=prompt_tokens, error=message)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc) or type(exc).__name__


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


__all__ = [
    "OpenAICompatGenerator",
    "ServerConfig",
    "ServerError",
    "VERBATIM_SPECIAL_TOKENS",
    "completion_body",
]
