"""Route: a definition's webhook, the one public route that runs something. The token in
the path is the credential (only its hash is stored); the body becomes the run's
``trigger.payload``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from tickwork.api.contract import answer
from tickwork.api.inputs import IdPath
from tickwork.api.schemas import RunOut
from tickwork.api.security import Services, client_address, services
from tickwork.definitions import admin
from tickwork.errors import NotFoundError, Throttled

router = APIRouter(tags=["webhooks"])

MAX_HEADERS = 50
MAX_HEADER_VALUE = 1024
DESCRIBING = frozenset({"content-type", "user-agent"})
WITHHELD = frozenset({"x-forwarded-for", "x-real-ip", "x-api-key", "x-auth-token", "x-csrf-token"})
"""``x-`` headers that are a proxy's or a credential, not the caller's description."""

TokenPath = Annotated[str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]


@router.post(
    "/api/webhooks/{id}/{token}",
    response_model=RunOut,
    status_code=202,
    responses=answer(404, "No such webhook (an unknown definition, no webhook or a wrong token)")
    | answer(409, "The definition is paused")
    | answer(
        429,
        "Too many calls of this webhook (api.webhook_rate a minute), or too many wrong tokens"
        " from this address",
    ),
)
async def call_webhook(
    id: IdPath,
    token: TokenPath,
    request: Request,
    svc: Annotated[Services, Depends(services)],
) -> dict[str, int]:
    """Run the definition now (public: the token is the credential). The body (at most 64
    KiB of UTF-8 text) is the run's ``trigger.payload``, the headers that describe the call
    its ``trigger.headers``."""
    caller = client_address(request)
    wait = svc.webhook_misses.peek(caller)
    if wait > 0:  # this address sent too many wrong tokens: no more lookups for a while
        raise Throttled("webhooks from this address", wait)

    def admit(definition_id: int) -> None:  # the token was right: the definition's own limit
        wait = svc.webhook_limiter.wait(definition_id)
        if wait > 0:
            raise Throttled(f"the webhook of definition {definition_id}", wait)

    body = await request.body()
    try:
        job_id = await admin.webhook_run(
            svc.pool, svc.store, id, token, body, passed_headers(request.headers), admit=admit
        )
    except NotFoundError:
        svc.webhook_misses.wait(caller)
        raise
    return {"job_id": job_id}


def passed_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers a run sees: what describes the call (``content-type``,
    ``user-agent``, ``x-*`` such as an event name or a signature to verify), never the
    caller's credentials or cookies; at most :data:`MAX_HEADERS`, each value cut to
    :data:`MAX_HEADER_VALUE` characters."""
    passed: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in WITHHELD or not (lowered in DESCRIBING or lowered.startswith("x-")):
            continue
        if len(passed) == MAX_HEADERS:
            break
        passed[lowered] = value[:MAX_HEADER_VALUE]
    return passed
