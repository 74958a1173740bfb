"""`ClientLoop`: one ``openai.AsyncOpenAI`` client on its own event loop in a background thread, so the
synchronous `recovery.generation.Generator` protocol can keep hundreds of requests in flight without a
thread each; `failure_reason` turns what the client raised into one line for ``GenerationResult.error``.

The client does the retrying (``max_retries``; ``Retry-After`` / ``retry-after-ms`` when the server sends
one, else its exponential backoff with jitter) and the timeouts; its connection pool is sized to the
generator's concurrency. A local server is reached directly, never through a proxy set in the
environment.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.parse
from concurrent.futures import Future
from typing import Any

from recovery.backends.openai_config import ServerConfig

# The header the client stamps on every attempt with the number of retries taken before it.
RETRY_COUNT_HEADER = "x-stainless-retry-count"


def import_openai() -> Any:
    """The ``openai`` package, or an `ImportError` naming the extra that brings it."""
    try:
        import openai
    except ImportError as exc:
        raise ImportError("the openai backend needs the openai client: pip install 'recovery[server]'") from exc
    return openai


def is_local(base_url: str) -> bool:
    """Whether ``base_url`` names this machine (loopback), which no proxy should stand between."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


class ClientLoop:
    """An ``AsyncOpenAI`` client and the event loop it runs on, started on first use.

    `submit_completion` may be called from any thread and returns a `concurrent.futures.Future` of the
    client's ``Completion``; `close` cancels nothing by itself (the caller cancels its futures), closes
    the client's connections and stops the loop. Using it again after `close` starts a new loop.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.openai = import_openai()
        self.config = config  # the server's address, key, retries, timeouts and connections
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None

    def _started(self) -> tuple[asyncio.AbstractEventLoop, Any]:
        with self._lock:
            if self._loop is None:
                openai = self.openai
                limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
                    max_connections=self.config.max_concurrency, max_keepalive_connections=self.config.max_concurrency
                )
                self._client = openai.AsyncOpenAI(
                    base_url=self.config.base_url,
                    # A key is required by the client; servers started without --api-key ignore this one.
                    api_key=self.config.api_key or "EMPTY",
                    max_retries=self.config.max_retries,
                    timeout=openai.Timeout(
                        self.config.timeout_s, connect=min(self.config.connect_timeout_s, self.config.timeout_s)
                    ),
                    http_client=openai.DefaultAsyncHttpxClient(
                        limits=limits, trust_env=not is_local(self.config.base_url)
                    ),
                )
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="openai-client", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop, self._client

    def submit_completion(
        self,
        kwargs: dict[str, Any],
        extra_body: dict[str, Any],
        *,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> Future:
        """Start one ``completions.create(**kwargs, extra_body=extra_body)`` call on the loop; ``timeout_s``
        and ``max_retries``, when given, replace the client's for this call."""
        loop, client = self._started()
        options: dict[str, Any] = {}
        if timeout_s is not None:
            options["timeout"] = self.openai.Timeout(timeout_s, connect=min(self.config.connect_timeout_s, timeout_s))
        if max_retries is not None:
            options["max_retries"] = max_retries
        if options:
            client = client.with_options(**options)
        return asyncio.run_coroutine_threadsafe(client.completions.create(**kwargs, extra_body=extra_body), loop)

    def list_models(self, *, timeout_s: float) -> list[str]:
        """The model ids the server lists, asked once (no retries) within ``timeout_s``; a `TimeoutError`
        when no answer came within it (the request is then cancelled)."""
        loop, client = self._started()

        async def ask() -> list[str]:
            page = await client.with_options(max_retries=0, timeout=timeout_s).models.list()
            return [model.id for model in page.data]

        return result_within(asyncio.run_coroutine_threadsafe(ask(), loop), timeout_s)

    def close(self) -> None:
        with self._lock:
            loop, thread, client = self._loop, self._thread, self._client
            self._loop = self._thread = self._client = None
        if loop is None:
            return

        async def shut_down() -> None:
            # Calls still pending (a caller that stopped waiting) are cancelled and awaited here: a task left
            # pending on a closed loop is reported by asyncio as "Task was destroyed but it is pending!".
            pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await client.close()

        try:
            asyncio.run_coroutine_threadsafe(shut_down(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            if not thread.is_alive():
                loop.close()


def result_within(future: Future, timeout_s: float) -> Any:
    """``future``'s result, waited for at most ``timeout_s``; on `TimeoutError` the call is cancelled first,
    so nothing is left running on the loop for a caller that gave up on it."""
    try:
        return future.result(timeout=timeout_s)
    except TimeoutError:
        future.cancel()
        raise


def attempts_made(exc: BaseException) -> int:
    """How many attempts the client made before raising ``exc`` (1 when it cannot tell)."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    try:
        return int(headers.get(RETRY_COUNT_HEADER, 0)) + 1 if headers is not None else 1
    except (TypeError, ValueError):
        return 1


def failure_reason(exc: BaseException, *, url: str = "", timeout_s: float | None = None) -> str:
    """One line saying why a call failed: the HTTP status and the server's words, a timeout, or the
    connection error, prefixed by the number of attempts when the client retried."""
    openai = import_openai()
    where = f" {url}" if url else ""
    if isinstance(exc, openai.APITimeoutError) or type(exc) is TimeoutError:
        within = f" within {timeout_s}s" if timeout_s is not None else ""
        reason = f"no answer from{where or ' the server'}{within} (timed out)"
    elif isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        reason = f"cannot reach{where or ' the server'}: {detail}"
    elif isinstance(exc, openai.APIStatusError):
        try:
            detail = exc.response.text[:500]
        except Exception:  # noqa: BLE001 — a body that cannot be read is not worth a second failure
            detail = str(exc)
        reason = f"HTTP {exc.status_code}{' from' + where if where else ''}: {detail}"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    attempts = attempts_made(exc)
    return f"gave up after {attempts} attempts: {reason}" if attempts > 1 else reason


__all__ = [
    "ClientLoop",
    "RETRY_COUNT_HEADER",
    "attempts_made",
    "failure_reason",
    "import_openai",
    "is_local",
    "result_within",
]
