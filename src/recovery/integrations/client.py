"""The one HTTP client of the reward server (`recovery serve-rewards`) that the project's integrations use: verl's
``server_url`` and the OpenRLHF reward file's ``server_url`` post through `post_json`.

A reward server under a trainer's load answers some requests 503 (its queue is full, a scoring worker died and
the rows could not be scored again in time) or drops a connection; none of that may fail a training step, and
none of it may turn into a reward. So `post_json` tries again — on 408, 429, 502, 503, 504 and on connection
errors — waiting a random time up to an exponentially growing bound ("full jitter", so a thousand clients
turned away together do not come back together), at least the server's ``Retry-After``, until ``deadline_s``
has passed; then it raises `RewardServerError` with the last answer. Any other status (a malformed request:
4xx naming the field) raises at once. Uses only the standard library.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["RETRY_STATUSES", "RetryPolicy", "RewardServerError", "post_json"]

#: The statuses that mean "not now": tried again.
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})


class RewardServerError(RuntimeError):
    """The reward server refused a request, or did not answer it before the deadline."""


@dataclass(frozen=True)
class RetryPolicy:
    """Give up ``deadline_s`` after the first try; between tries wait a random time up to ``first_backoff_s``
    × 2^(tries - 1), capped at ``max_backoff_s``, plus the server's ``Retry-After``; each try waits at most
    ``request_timeout_s`` for its answer."""

    deadline_s: float = 600.0
    first_backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    request_timeout_s: float = 300.0

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> RetryPolicy:
        """The policy a framework's reward kwargs set (``server_deadline_s``, ``server_timeout_s``)."""
        return cls(
            deadline_s=float(kwargs.get("server_deadline_s", cls.deadline_s)),
            request_timeout_s=float(kwargs.get("server_timeout_s", cls.request_timeout_s)),
        )


def _retry_after(error: urllib.error.HTTPError) -> float:
    try:
        return max(0.0, float(error.headers.get("Retry-After", 0)))
    except (TypeError, ValueError):
        return 0.0


def post_json(url: str, body: Any, policy: RetryPolicy = RetryPolicy(), *, rng: random.Random | None = None) -> Any:
    """POST ``body`` as JSON to ``url`` and return the decoded answer, trying again as the module doc says."""
    rng = rng or random.Random()
    data = json.dumps(body, default=str).encode()
    give_up = time.monotonic() + policy.deadline_s
    tries, last = 0, "no answer"
    while True:
        tries += 1
        retry_after = 0.0
        request = urllib.request.Request(url, data, {"content-type": "application/json"})
        try:
            left = max(0.1, min(policy.request_timeout_s, give_up - time.monotonic()))
            with urllib.request.urlopen(request, timeout=left) as reply:  # noqa: S310 - the server the user named
                return json.loads(reply.read())
        except urllib.error.HTTPError as err:
            detail = err.read()[:500].decode("utf-8", errors="replace")
            if err.code not in RETRY_STATUSES:
                raise RewardServerError(f"{url}: HTTP {err.code}: {detail}") from None
            retry_after, last = _retry_after(err), f"HTTP {err.code}: {detail}"
        except (OSError, http.client.HTTPException) as err:  # refused, reset, timed out (URLError is an OSError)
            last = f"{type(err).__name__}: {err}"
        wait = retry_after + rng.uniform(0, min(policy.max_backoff_s, policy.first_backoff_s * 2 ** (tries - 1)))
        if time.monotonic() + wait > give_up:
            raise RewardServerError(
                f"{url}: no answer after {tries} tries in {policy.deadline_s:g} s; the last: {last}"
            ) from None
        time.sleep(wait)
