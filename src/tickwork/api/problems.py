"""Errors as RFC 9457 problem details: one mapping from tickwork's exception tree to HTTP."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tickwork.api.methods import allowed_methods
from tickwork.api.paths import route_path
from tickwork.db.driver_errors import DriverError, database_error
from tickwork.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    DatabaseError,
    DatabaseUnavailable,
    DataRefused,
    EnqueueError,
    EnqueueFailed,
    InvalidInput,
    JobNotFoundError,
    JobStateError,
    LoginThrottled,
    NoLeaseHolderError,
    NotFoundError,
    NotLeaderError,
    PermissionDenied,
    ScheduleError,
    SignalSupersededError,
    Throttled,
    TickworkError,
)

log = logging.getLogger("tickwork.api")

MEDIA_TYPE = "application/problem+json"

REDACTED = ("password", "token", "secret", "value", "headers", "source", "body", "url")
"""Request fields whose values an error never echoes."""
SHOWN_INPUT = 80
"""Longest input value an error echoes; a longer one is described by its length."""
RETRY_AFTER_UNAVAILABLE = 5
"""Retry-After (seconds) of a 503 while the database is out of reach."""

STATUS: list[tuple[type[Exception], int, str]] = [
    # Most specific first: LoginThrottled is an AuthError, UnknownTaskError an EnqueueError.
    (LoginThrottled, 429, "Too many failed logins"),
    (Throttled, 429, "Too many requests"),
    (AuthError, 401, "Not authenticated"),
    (PermissionDenied, 403, "Forbidden"),
    (JobNotFoundError, 404, "Not found"),
    (NotFoundError, 404, "Not found"),
    (NotLeaderError, 409, "Ask the lease holder"),
    (NoLeaseHolderError, 503, "No lease holder"),
    (JobStateError, 409, "Conflict with the current state"),
    (ConflictError, 409, "Conflict with the current state"),
    (EnqueueError, 400, "Invalid input"),
    (InvalidInput, 400, "Invalid input"),
    (ScheduleError, 400, "Invalid input"),
    (ConfigError, 400, "Invalid input"),
    (DataRefused, 400, "Invalid input"),
    (DatabaseUnavailable, 503, "Database unavailable"),
    (DatabaseError, 500, "Internal error"),
]


def problem(
    status: int,
    title: str,
    detail: str,
    field: str | None = None,
    extensions: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status}
    body["detail"] = detail
    if field is not None:
        body["field"] = field
    body |= extensions or {}
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers or None)


def _extensions(exc: TickworkError) -> dict[str, Any]:
    """Problem extension members some errors carry (RFC 9457 section 3.2)."""
    if isinstance(exc, SignalSupersededError):
        return {"supersededByPendingId": exc.superseded_by}
    if isinstance(exc, NotLeaderError):
        return {"lease": exc.role, "holder": exc.holder}
    if isinstance(exc, NoLeaseHolderError):
        return {"leases": exc.roles, "holder": None}
    return {}


def _for(exc: TickworkError) -> JSONResponse:
    for kind, status, title in STATUS:
        if isinstance(exc, kind):
            headers: dict[str, str] = {}
            if isinstance(exc, AuthError) and not isinstance(exc, LoginThrottled):
                headers["WWW-Authenticate"] = "Bearer"
            if isinstance(exc, LoginThrottled | Throttled):
                headers["Retry-After"] = str(max(1, round(exc.retry_after)))
            if isinstance(exc, NoLeaseHolderError):
                headers["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE)
            if isinstance(exc, DatabaseUnavailable):
                log.warning("database unavailable in a request", extra={"error": str(exc)})
                headers["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE)
                extensions: dict[str, Any] = {}
                detail = "the database could not be reached; retry shortly"
                if isinstance(exc, EnqueueFailed):
                    extensions["stored"] = "unknown" if exc.stored is None else "no"
                    detail = str(exc)
                return problem(status, title, detail, None, extensions, headers)
            if isinstance(exc, DatabaseError):
                log.error("database error in a request", extra={"error": str(exc)})
                return problem(
                    500, "Internal error", "the database refused the operation; the log has it"
                )
            field = getattr(exc, "field", None)
            return problem(status, title, str(exc), field, _extensions(exc), headers)
    log.exception("unexpected tickwork error", exc_info=exc)
    return problem(500, "Internal error", "the server failed; the log has the details")


ENQUEUE_ROUTE = ("POST", "/api/jobs")


def _before_enqueue(request: Request, exc: DatabaseUnavailable) -> DatabaseUnavailable:
    """An outage met by an enqueue request before its route ran (checking the caller's
    session, say) stored nothing: say so, as the route itself would."""
    route = (request.method, route_path(request.scope))  # below a mount's path
    if isinstance(exc, EnqueueFailed) or route != ENQUEUE_ROUTE:
        return exc
    return EnqueueFailed(False, str(exc))


def _check_pool(request: Request) -> None:
    """After a lost connection, have the pool test its idle ones now, so the requests after
    a database restart do not each find another dead connection."""
    services = getattr(request.app.state, "services", None)
    pool = getattr(services, "pool", None)
    if pool is not None and not _checks:  # one check at a time
        task = asyncio.create_task(pool.check())
        _checks.add(task)
        task.add_done_callback(_checks.discard)


_checks: set[asyncio.Task[None]] = set()


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _json_syntax(request: Request, error: Any) -> str:
    """Where a body stops being JSON: line, column and character (the parser's offset is
    in the error's location), and what the parser expected there; never the body itself."""
    reason = str((error.get("ctx") or {}).get("error", "")) or "not JSON"
    at = error["loc"][1] if len(error["loc"]) > 1 and isinstance(error["loc"][1], int) else None
    if at is None:
        return f"the request body is not valid JSON: {reason}"
    text = (await request.body()).decode("utf-8", "replace")[:at]  # json's offset: characters
    line = text.count("\n") + 1
    column = at - (text.rfind("\n") + 1) + 1
    return (
        f"the request body is not valid JSON: {reason} at line {line}, column {column}"
        f" (character {at})"
    )


def install(api: FastAPI) -> None:
    """Register the handlers that turn every error into problem details."""

    async def tickwork_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TickworkError)
        if isinstance(exc, DatabaseUnavailable):
            _check_pool(request)
            exc = _before_enqueue(request, exc)
        return _for(exc)

    async def driver_error(request: Request, exc: Exception) -> JSONResponse:
        # a statement run without the translation of db/ (the storage seam translates most)
        assert isinstance(exc, DriverError)
        return await tickwork_error(request, database_error(exc))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in a request", exc_info=exc)
        return problem(500, "Internal error", "the server failed; the log has the details")

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0]
        if first["loc"][:1] == ("body",):
            sent = request.headers.get("content-type")
            if sent is not None and not _is_json(sent):
                return problem(
                    415,
                    "Unsupported media type",
                    "the request body must be JSON (Content-Type: application/json), not"
                    f" {sent.split(';')[0].strip()[:SHOWN_INPUT]!r}",
                    "body",
                    headers={"Accept": "application/json"},
                )
            if first.get("type") == "json_invalid":
                return problem(400, "Invalid request", await _json_syntax(request, first), "body")
        unknown = first.get("type") == "extra_forbidden"  # a field of any name: never echoed
        where = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path"))
        value = first.get("input")
        if isinstance(value, dict | list) or value is None or not where or unknown:
            shown = ""  # a whole body (of any content type) is never echoed: it may hold secrets
        elif any(word in where.lower() for word in REDACTED):
            shown = " (<redacted>)"
        elif isinstance(value, str | bytes) and len(value) > SHOWN_INPUT:
            shown = f" (a value of {len(value):,} characters)"
        else:
            shown = f" ({value!r})"
        detail = f"{where or 'the request body'}{shown}: {first['msg']}"
        more = len(exc.errors()) - 1
        if more:
            detail += f" (and {more} more)"
        return problem(400, "Invalid request", detail, where or None)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method the path takes, not one route's
            allowed = allowed_methods(request.app, request.scope)
            if not allowed:  # only the dashboard's catch-all matched: no route takes it
                path = route_path(request.scope)
                return problem(404, "Not found", f"route {path!r} does not exist")
            headers["Allow"] = ", ".join(allowed)
        return problem(exc.status_code, str(exc.detail), str(exc.detail), headers=headers)

    api.add_exception_handler(TickworkError, tickwork_error)
    api.add_exception_handler(DriverError, driver_error)
    api.add_exception_handler(Exception, unexpected)  # a problem body, never text/plain
    api.add_exception_handler(RequestValidationError, validation_error)
    api.add_exception_handler(HTTPException, http_error)
