"""The reward server's settings (`ServerConfig`), in a module that loads no web framework, so the
``serve-rewards`` command takes its defaults from here."""

from __future__ import annotations

from dataclasses import dataclass, field

from recovery.integrations.core import RewardSettings

__all__ = ["ServerConfig"]


@dataclass(frozen=True)
class ServerConfig:
    """The server's bounds: ``workers`` scoring processes, each given chunks of up to ``chunk_rows`` rows (at most
    ``in_flight`` chunks out at once; default two per worker); at most ``max_pending_rows`` rows admitted and not
    answered yet (beyond: 503); ``max_rows`` rows and ``max_body_mb`` of body per request (beyond: 413);
    ``header_timeout_s`` / ``read_timeout_s`` to receive the headers / the body (beyond: 408); ``time_limit_s``
    from arrival to answer, after which a request with rows not scored yet gets 503 (retryable); a row whose
    chunk failed is scored again up to ``attempts`` times in all."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    chunk_rows: int = 64
    in_flight: int | None = None
    max_rows: int = 8192
    max_pending_rows: int = 65536
    max_body_mb: float = 16.0
    header_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    time_limit_s: float = 60.0
    attempts: int = 3
    settings: RewardSettings = field(default_factory=RewardSettings)

    def __post_init__(self) -> None:
        for name in ("workers", "chunk_rows", "max_rows", "max_pending_rows", "attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1")
        if self.in_flight is not None and self.in_flight < 1:
            raise ValueError("in_flight must be ≥ 1")
        for name in ("max_body_mb", "header_timeout_s", "read_timeout_s", "time_limit_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.max_rows > self.max_pending_rows:
            raise ValueError("max_rows must be ≤ max_pending_rows (a request of max_rows rows must fit)")
