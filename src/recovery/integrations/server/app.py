"""The reward server's HTTP application (FastAPI, served by uvicorn): what it accepts and answers.

Endpoints (JSON):

* ``GET /health`` — ``{"status": "ok", "workers", "pending", "queued", "restarts", "retried", "settings"}`` once
  the scoring workers are up (the server listens only then).
* ``POST /score`` — ``{"rows": [{"completion", "answer", "answer_type", "domain", "source", "question",
  "rel_tol", "abs_tol", "intervention", "category", "reference_length", "id"}]}`` (``completion``, ``answer``
  and ``answer_type`` required; the rest as the rewards' columns, `recovery.rewards`) → ``{"results": [{"score",
  "correctness", "doubt", "length", "scorable", "verdict", "reason", "retryable", "id"}], "seconds"}``, one per
  row, in order, each with its own ``id``. A row the reward cannot score (permanent: an unusable gold) has
  ``score`` null and the ``reason``.
* ``POST /openrlhf`` — OpenRLHF's remote reward protocol: ``{"query", "prompts", "labels"}`` →
  ``{"rewards", "scores", "extra_logs"}`` (`recovery.integrations.openrlhf`); numbers only, rows the reward
  cannot score follow the unscorable policy (`recovery.integrations.core`), ``extra_logs.scorable`` marks them.
* ``POST /verl`` — verl's batched reward arguments ``{"data_sources", "solution_strs", "ground_truths",
  "extra_infos"}`` → ``{"results": [{"score", "correctness", "doubt", "length", "scorable"}]}``, what
  `recovery.integrations.verl.compute_score_batch` returns (and what it fetches with ``server_url=``).

Rows of all requests are scored together in chunks (`recovery.integrations.server.batcher`). A transient
failure is never a score: a row whose worker died is scored again on a fresh pool, and a request with a row
still unscored at its time limit (or after the retries) gets **503** with ``Retry-After`` — ``/score`` with
every row's result beside it (the retryable ones ``retryable: true``, with the reason), ``/openrlhf`` and
``/verl`` with the indices of the rows to retry (``{"error": "retry", "detail", "rows": [{"index", "reason"}]}``).
A full queue (``max_pending_rows``) is 503 too.

A malformed request gets 400 (not JSON) or 422 (a field missing, of the wrong type, or holding invalid text),
``{"error", "detail", "fields": [{"field": "rows[3].answer_type", "message"}]}`` naming each bad field; a body
over the size limit 413, one whose headers or body are not received in time 408
(`recovery.integrations.server.limits`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from recovery.integrations.core import PARTS, REWARD_COLUMNS, RewardSettings, UnscorableRow, filter_score
from recovery.integrations.openrlhf import label_columns, split_response
from recovery.integrations.server.batcher import Busy, RowBatcher
from recovery.integrations.server.config import ServerConfig
from recovery.integrations.server.limits import BodyLimits
from recovery.integrations.server.pool import ScoringPool
from recovery.integrations.server.shapes import OpenRLHFRequest, ScoreRequest, VerlRequest, field_name
from recovery.integrations.verl import row_columns

__all__ = ["RETRY_AFTER_S", "ServerConfig", "create_app"]

#: What a 503 asks a client to wait before it tries again (``Retry-After``), in seconds.
RETRY_AFTER_S = 1


def _error(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status, headers=headers)


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


def _retry(results: list[dict[str, Any]], time_limit_s: float) -> JSONResponse | None:
    """The 503 of a request with rows to retry (`/openrlhf`, `/verl`), or None when every row has its answer."""
    rows = [{"index": i, "reason": r["reason"]} for i, r in enumerate(results) if r["retryable"]]
    if not rows:
        return None
    detail = f"{len(rows)} of {len(results)} rows not scored (a scoring worker failed, or the time limit of "
    return _error(503, "retry", detail + f"{time_limit_s:g} s): send the request again", rows=rows)


def create_app(config: ServerConfig | None = None) -> Any:
    """The ASGI application (the FastAPI app behind `BodyLimits`); scoring workers start with its lifespan."""
    config = config or ServerConfig()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = ScoringPool(config.workers, config.settings)
        batcher = RowBatcher(
            pool,
            chunk_rows=config.chunk_rows,
            max_pending_rows=config.max_pending_rows,
            in_flight=config.in_flight or 2 * config.workers,
            attempts=config.attempts,
            chunk_timeout_s=config.time_limit_s,
        )
        state["pool"], state["batcher"] = pool, batcher
        await asyncio.to_thread(pool.warm)
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()
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
        named: dict[str, str] = {}  # one entry per field (a union reports each of its branches)
        for e in errors:
            name, message = field_name(tuple(e.get("loc", ()))), str(e.get("msg"))
            if name not in named or "invalid text" in message:
                named[name] = message
        fields = [{"field": k, "message": v} for k, v in list(named.items())[:20]]
        names = ", ".join(f["field"] for f in fields)
        return _error(422, "invalid request", f"bad or missing field(s): {names}", fields=fields)

    async def scored(completions: list, rows: list[dict[str, Any]]) -> list[dict[str, Any]] | JSONResponse:
        if len(rows) > config.max_rows:
            return _error(413, "too many rows", f"{len(rows)} rows; the limit is {config.max_rows}")
        try:
            return await state["batcher"].score(completions, rows, config.time_limit_s)
        except Busy as err:
            return _error(503, "busy", str(err))

    @api.get("/health")
    async def health() -> dict[str, Any]:
        batcher: RowBatcher = state["batcher"]
        return {
            "status": "ok",
            "workers": config.workers,
            "pending": batcher.pending,
            "queued": batcher.queued,
            "restarts": state["pool"].restarts,
            "retried": batcher.retried,
            "settings": config.settings.as_dict(),
        }

    @api.post("/score")
    async def score(request: ScoreRequest) -> Any:
        started = time.monotonic()
        rows = [r.model_dump(include=set(REWARD_COLUMNS)) for r in request.rows]
        results = await scored([r.completion for r in request.rows], rows)
        if isinstance(results, JSONResponse):
            return results
        answered = [{**result, "id": row.id} for result, row in zip(results, request.rows, strict=True)]
        body = {"results": answered, "seconds": round(time.monotonic() - started, 4)}
        retry = sum(r["retryable"] for r in answered)
        if retry:
            detail = f"{retry} of {len(answered)} rows not scored (retryable: true): send them again"
            return _error(503, "retry", detail, **body)
        return body

    @api.post("/openrlhf")
    async def openrlhf(request: OpenRLHFRequest) -> Any:
        rows = [label_columns(label) for label in request.labels]
        responses = [
            split_response(q, p, row.get("strip") or ()) for q, p, row in zip(request.query, request.prompts, rows)
        ]
        results = await scored(responses, rows)
        if isinstance(results, JSONResponse):
            return results
        if (retry := _retry(results, config.time_limit_s)) is not None:
            return retry
        try:
            numbers = [_numbers(r, config.settings, i) for i, r in enumerate(results)]
        except UnscorableRow as err:
            return _error(422, "unscorable row", str(err))
        return {
            "rewards": [n["score"] for n in numbers],
            "scores": [filter_score(n, r["correctness"]) for n, r in zip(numbers, results)],
            "extra_logs": {p: [n[p] for n in numbers] for p in PARTS},
        }

    @api.post("/verl")
    async def verl(request: VerlRequest) -> Any:
        rows = [row_columns(g, e) for g, e in zip(request.ground_truths, request.extra_infos)]
        results = await scored(list(request.solution_strs), rows)
        if isinstance(results, JSONResponse):
            return results
        if (retry := _retry(results, config.time_limit_s)) is not None:
            return retry
        try:
            return {"results": [_numbers(r, config.settings, i) for i, r in enumerate(results)]}
        except UnscorableRow as err:
            return _error(422, "unscorable row", str(err))

    return BodyLimits(api, max_bytes=int(config.max_body_mb * 1024 * 1024), read_timeout_s=config.read_timeout_s)
