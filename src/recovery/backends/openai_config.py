"""`ServerConfig`: where an OpenAI-compatible server is, how to talk to it, and what it was found to accept
(`recovery.backends.openai_probe`); and the body fields requests are built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# vLLM / SGLang options that keep think tags and other special tokens verbatim in the returned text.
VERBATIM_SPECIAL_TOKENS: Mapping[str, Any] = {
    "skip_special_tokens": False,
    "spaces_between_special_tokens": False,
}

PROMPT_FORMATS = ("auto", "tokens", "text")
SAMPLES_PER_REQUEST = ("auto", "n", "1")

# Body fields the client's ``completions.create`` takes by name; every other field goes in ``extra_body``.
SDK_FIELDS = ("model", "prompt", "n", "temperature", "top_p", "max_tokens", "seed", "stop")


@dataclass(frozen=True)
class ServerConfig:
    """Where the server is and how to talk to it.

    ``base_url`` ends with ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``). ``prompt_format`` is ``"tokens"``
    (ids built locally: exact, one BOS), ``"text"`` or ``"auto"`` (tokens if the server takes them);
    ``samples_per_request`` is ``"n"`` (one request asks for all n samples), ``"1"`` (one request per
    sample) or ``"auto"``. Either left ``auto`` makes the generator probe the server before its first
    request (`recovery.backends.openai_probe`), which also sets ``strip_bos`` (send text without its
    leading BOS, which the server adds), ``send_seed`` and the ``extra_body`` fields the server takes.
    ``require_seed``: a server that refuses ``seed`` fails the probe, unless this is False (the run is then
    not reproducible). ``extra_body`` is merged into every request body. ``timeout_s`` bounds each connect,
    write and read wait of one attempt; ``connect_timeout_s`` the connect alone (a server that is down
    should not cost ``timeout_s``). ``probe_timeout_s`` bounds each question the probe asks before any work
    (whether anything answers, then each one-token request, retries included): a server that accepts
    connections and never answers fails within it, while a server slow to generate long continuations
    is still given ``timeout_s`` per attempt once it has answered the probe.
    """

    base_url: str
    model: str
    api_key: str | None = None
    max_concurrency: int = 16
    timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    probe_timeout_s: float = 15.0
    max_retries: int = 5
    prompt_format: str = "auto"
    samples_per_request: str = "auto"
    require_seed: bool = True
    strip_bos: bool = False
    send_seed: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=lambda: dict(VERBATIM_SPECIAL_TOKENS))

    def __post_init__(self) -> None:
        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, got {self.prompt_format!r}")
        if self.samples_per_request not in SAMPLES_PER_REQUEST:
            raise ValueError(
                f"samples_per_request must be one of {SAMPLES_PER_REQUEST}, got {self.samples_per_request!r}"
            )
        timeouts = (self.timeout_s, self.connect_timeout_s, self.probe_timeout_s)
        if self.max_concurrency < 1 or self.max_retries < 0 or min(timeouts) <= 0:
            raise ValueError(
                "max_concurrency ≥ 1, max_retries ≥ 0, timeout_s > 0, connect_timeout_s > 0 and "
                "probe_timeout_s > 0 are required"
            )
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")

    @property
    def completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/completions"

    @property
    def resolved(self) -> bool:
        """Whether nothing is left to learn from the server (no ``auto`` setting)."""
        return self.prompt_format != "auto" and self.samples_per_request != "auto"


__all__ = ["PROMPT_FORMATS", "SAMPLES_PER_REQUEST", "SDK_FIELDS", "ServerConfig", "VERBATIM_SPECIAL_TOKENS"]
