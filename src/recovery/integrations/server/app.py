"""The reward server's HTTP application (FastAPI, served by uvicorn): what it accepts and answers.

Endpoints (JSON):

* ``GET /health`` — ``{"status": "ok", "workers", "in_flight", "queued", "settings"}`` once the scoring
  workers are up (the server listens only then).
* ``POST /score`` — ``{"rows": [{"completion", "answer", "answer_type", "domain", "source", "question",
  "rel_tol", "abs_tol", "intervention", "category", "reference_length", "id"}]}`` (``completion``, ``answer``
  and ``answer_type`` required; the rest as the rewards' columns, `recovery.rewards`) → ``{"results": [{"score",
  "correctness", "doubt", "length", "scorable", "verdict", "reason", "id"}], "seconds"}``, one per row, in order.
  A row the reward cannot score, whose worker failed, or not scored within the time limit has ``score`` null
  and a ``reason`` — never an error for the batch.
* ``POST /openrlhf`` — OpenRLHF's remote reward protocol: ``{"query", "prompts", "labels"}`` →
  ``{"rewards", "scores", "extra_logs"}`` (`recovery.integrations.openrlhf`); numbers only, rows that cannot be
  scored follow the unscorable policy (`recovery.integrations.core`).
* ``POST /verl`` — verl's batched reward arguments ``{"data_sources", "solution_strs", "ground_truths",
  "extra_infos"}`` → ``{"results": [{"score", "correctness", "doubt", "length", "scorable"}]}``, what
  `recovery.integrations.verl.compute_score_batch` returns (and what it fetches with ``server_url=``).

A malformed request gets 400 (not JSON) or 422 (a field missing or of the wrong type), ``{"error", "detail",
"fields": [{"field": "rows[3].answer_type", "message"}]}`` naming each bad field; a body over the size limit
413, one not received in time 408 (`recovery.integrations.server.limits`), a full queue 503.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from recovery.integrations.core import PARTS, REWARD_COLUMNS, RewardSettings, UnscorableRow
from recovery.integrations.openrlhf import label_columns, split_response
from recovery.integrations.server.limits import BodyLimits
from recovery.integrations.server.pool import ScoringPool
from recovery.integrations.verl import row_columns
from recovery.types import AnswerType

__all__ = ["ServerConfig", "create_app"]

_ANSWER_TYPES = sorted(t.value for t in AnswerType)


@dataclass(frozen=True)
class ServerConfig:
    """The server's bounds: ``workers`` scoring processes; at most ``max_concurrent`` requests scored at once and
    ``max_queue`` waiting (beyond: 503); ``max_rows`` rows and ``max_body_mb`` of body per request (beyond:
    413); ``read_timeout_s`` to receive a body (beyond: 408); ``time_limit_s`` from arrival to answer, after
    which the rows not scored yet are answered null with the reason."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    chunk_rows: int = 64
    max_rows: int = 8192
    max_body_mb: float = 16.0
    read_timeout_s: float = 30.0
    time_limit_s: float = 60.0
    max_concurrent: int = 8
    max_queue: int = 64
    settings: RewardSettings = field(default_factory=RewardSettings)

    def __post_init__(self) -> None:
        for name in ("workers", "chunk_rows", "max_rows", "max_concurrent", "max_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1")
        for name in ("max_body_mb", "read_timeout_s", "time_limit_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")


class ScoreRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completion: str
    answer: str | int | float
    answer_type: str
    domain: str | None = None
    source: str | None = None
    question: str | None = None
    rel_tol: float | None = Field(default=None, ge=0)
    abs_tol: float | None = Field(default=None, ge=0)
    intervention: str | None = None
    category: str | None = None
    reference_length: float | None = None
    id: str | int | None = None

    @field_validator("answer_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value.strip().lower() not in _ANSWER_TYPES:
            raise ValueError(f"must be one of {', '.join(_ANSWER_TYPES)}")
        return value


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: list[ScoreRow] = Field(min_length=1)


class OpenRLHFRequest(BaseModel):
    query: list[str] = Field(min_length=1)
    prompts: list[str]
    labels: list[Any]

    @model_validator(mode="after")
    def _same_length(self) -> OpenRLHFRequest:
        if not len(self.query) == len(self.prompts) == len(self.labels):
            raise ValueError(
                f"query, prompts and labels differ in length ({len(self.query)}, {len(self.prompts)}, {len(self.labels)})"
            )
        return self


class VerlRequest(BaseModel):
    data_sources: list[Any]
    solution_strs: list[str] = Field(min_length=1)
    ground_truths: list[Any]
    extra_infos: list[dict[str, Any] | None]

    @model_validator(mode="after")
    def _same_length(self) -> VerlRequest:
        lengths = {len(self.data_sources), len(self.solution_strs), len(self.ground_truths), len(self.extra_infos)}
        if len(lengths) != 1:
            raise ValueError("data_sources, solution_strs, ground_truths and extra_infos differ in length")
        return self


def _field(loc: tuple) -> str:
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _error(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status)


class _Gate:
    """At most ``concurrent`` requests inside, ``queue`` waiting; `Busy` beyond."""

    class Busy(Exception):
        pass

    def __init__(self, concurrent: int, queue: int) -> None:
        self.slots, self.queue_limit = asyncio.Semaphore(concurrent), queue
        self.queued = self.in_flight = 0

    @asynccontextmanager
    async def enter(self, timeout_s: float):
        if self.slots.locked() and self.queued >= self.queue_limit:
            raise self.Busy
        self.queued += 1
        try:
            await asyncio.wait_for(self.slots.acquire(), max(0.001, timeout_s))
        finally:
            self.queued -= 1
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.slots.release()


def _numbers(result: Mapping[str, Any], settings: RewardSettings, index: int) -> dict[str, float]:
    """A server row result as the frameworks' numbers (the unscorable policy applied)."""
    if result["score"] is None:
        if settings.unscorable == "raise":
            raise UnscorableRow(f"row {index}: {result['reason']} (unscorable='raise')")
        score = settings.neutral_score
    else:
        score = result["score"]
    parts = {p: float(result[p] or 0.0) for p in PARTS if p != "scorable"}
    return {"score": float(score), **parts, "scorable": 1.0 if result["score"] is not None else 0.0}


def create_app(config: ServerConfig | None = None) -> Any:
    """The ASGI application (the FastAPI app behind `BodyLimits`); scoring workers start with its lifespan."""
    config = config or ServerConfig()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = ScoringPool(config.workers, config.settings, chunk_rows=config.chunk_rows)
        state["pool"], state["gate"] = pool, _Gate(config.max_concurrent, config.max_queue)
        await asyncio.to_thread(pool.warm)
        try:
            yield
        finally:
            await asyncio.to_thread(pool.close)

    api = FastAPI(title="recovery reward server", lifespan=lifespan)

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        bad_json = [e for e in errors if e.get("type") == "json_invalid"]
        if bad_json:  # its location is ("body", <character>)
            where = (bad_json[0].get("loc") or ("body", "?"))[-1]
            message = f"{bad_json[0].get('msg')} at character {where}"
            return _error(
                400,
                "invalid JSON",
                f"the body is not valid JSON: {message}",
                fields=[{"field": "body", "message": message}],
            )
        fields = [{"field": _field(tuple(e.get("loc", ()))), "message": str(e.get("msg"))} for e in errors[:20]]
        names = ", ".join(f["field"] for f in fields)
        return _error(422, "invalid request", f"bad or missing field(s): {names}", fields=fields)

    async def scored(completions: list, rows: list[dict[str, Any]]) -> list[dict[str, Any]] | JSONResponse:
        if len(rows) > config.max_rows:
            return _error(413, "too many rows", f"{len(rows)} rows; the limit is {config.max_rows}")
        started = time.monotonic()
        gate: _Gate = state["gate"]
        try:
            async with gate.enter(config.time_limit_s):
                left = config.time_limit_s - (time.monotonic() - started)
                return await state["pool"].score(completions, rows, left)
        except _Gate.Busy:
            return JSONResponse(
                {"error": "busy", "detail": f"{gate.queued} requests already waiting"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        except TimeoutError:
            return _error(503, "busy", f"no scoring slot free within the time limit of {config.time_limit_s:g} s")

    @api.get("/health")
    async def health() -> dict[str, Any]:
        gate: _Gate = state["gate"]
        return {
            "status": "ok",
            "workers": config.workers,
            "in_flight": gate.in_flight,
            "queued": gate.queued,
            "settings": config.settings.as_dict(),
        }

    @api.post("/score")
    async def score(request: ScoreRequest) -> Any:
        started = time.monotonic()
        rows = [r.model_dump(include=set(REWARD_COLUMNS)) for r in request.rows]
        results = await scored([r.completion for r in request.rows], rows)
        if isinstance(results, JSONResponse):
            return results
        for result, row in zip(results, request.rows):
            result["id"] = row.id
        return {"results": results, "seconds": round(time.monotonic() - started, 4)}

    @api.post("/openrlhf")
    async def openrlhf(request: OpenRLHFRequest) -> Any:
        rows = [label_columns(label) for label in request.labels]
        responses = [
            split_response(q, p, row.get("strip") or ()) for q, p, row in zip(request.query, request.prompts, rows)
        ]
        results = await scored(responses, rows)
        if isinstance(results, JSONResponse):
            return results
        try:
            numbers = [_numbers(r, config.settings, i) for i, r in enumerate(results)]
        except UnscorableRow as err:
            return _error(422, "unscorable row", str(err))
        return {
            "rewards": [n["score"] for n in numbers],
            "scores": [n["correctness"] for n in numbers],
            "extra_logs": {p: [n[p] for n in numbers] for p in PARTS},
        }

    @api.post("/verl")
    async def verl(request: VerlRequest) -> Any:
        rows = [row_columns(g, e) for g, e in zip(request.ground_truths, request.extra_infos)]
        results = await scored(list(request.solution_strs), rows)
        if isinstance(results, JSONResponse):
            return results
        try:
            return {"results": [_numbers(r, config.settings, i) for i, r in enumerate(results)]}
        except UnscorableRow as err:
            return _error(422, "unscorable row", str(err))

    return BodyLimits(api, max_bytes=int(config.max_body_mb * 1024 * 1024), read_timeout_s=config.read_timeout_s)
