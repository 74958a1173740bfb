"""Request limits: the body, as pure ASGI middleware in front of the application — a body over ``max_bytes``
gets 413, one not fully received within ``read_timeout_s`` gets 408 (a slow or stalled client cannot hold a
request slot), both answered here before the application sees anything — and the headers, in the HTTP
protocol (`header_timeout_protocol`): a connection that has not sent a request's complete headers within
``header_timeout_s`` (of opening, or of its previous response) gets 408 and is closed.

The body is read here (at most ``max_bytes`` of it, checked against ``Content-Length`` first and counted as it
arrives for chunked bodies) and replayed to the application, so the application never meets a half-read body
and the error responses never race one it started.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["BodyLimits", "error_body", "header_timeout_protocol"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def error_body(error: str, detail: str, **extra: Any) -> bytes:
    return json.dumps({"error": error, "detail": detail, **extra}).encode()


class _TooLarge(Exception):
    pass


class BodyLimits:
    """Wraps an ASGI ``app``; HTTP requests only (lifespan and others pass through)."""

    def __init__(self, app: Any, *, max_bytes: int, read_timeout_s: float) -> None:
        self.app, self.max_bytes, self.read_timeout_s = app, int(max_bytes), float(read_timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(
                send, 413, "body too large", f"{int(declared)} bytes declared; the limit is {self.max_bytes}"
            )
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.read_timeout_s)
        except _TooLarge:
            await self._reject(send, 413, "body too large", f"more than {self.max_bytes} bytes sent")
            return
        except TimeoutError:
            await self._reject(send, 408, "request timeout", f"body not received within {self.read_timeout_s:g} s")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as the server would

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    @staticmethod
    async def _reject(send: Send, status: int, error: str, detail: str) -> None:
        body = error_body(error, detail)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def header_timeout_protocol(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol (``uvicorn.Config(http=...)``) with a deadline for each request's headers: uvicorn
    itself waits for them indefinitely (its keep-alive timeout stops at the first byte a client sends)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # its headers are in: the body has its own limit (BodyLimits)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.cycle is not None and not self.cycle.response_complete or self.transport.is_closing():
                return
            body = error_body("request timeout", f"headers not received within {header_timeout_s:g} s")
            head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
            self.transport.write(head.encode() + b"\r\nconnection: close\r\n\r\n" + body)
            self.transport.close()

    return HeaderTimeoutProtocol
