"""Route: a definition's webhook, the one public route that runs something. The token in
the path is the credential (only its hash is stored); the body becomes the run's
``trigger.payload``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from tickwork.api.contract import answer
from tickwork.api.inputs import IdPath
from tickwork.api.schemas import RunOut
from tickwork.api.security import Services, services
from tickwork.definitions import admin

router = APIRouter(tags=["webhooks"])

MAX_CONTENT_TYPE = 200

TokenPath = Annotated[str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]


@router.post(
    "/api/webhooks/{id}/{token}",
    response_model=RunOut,
    status_code=202,
    responses=answer(404, "No such webhook (an unknown definition, no webhook or a wrong token)")
    | answer(409, "The definition is paused"),
)
async def call_webhook(
    id: IdPath,
    token: TokenPath,
    request: Request,
    svc: Annotated[Services, Depends(services)],
) -> dict[str, int]:
    """Run the definition now (public: the token is the credential). The body (at most 64
    KiB of UTF-8 text) is kept as the run's ``trigger.payload``."""
    body = await request.body()
    content_type = request.headers.get("content-type")
    job_id = await admin.webhook_run(
        svc.pool,
        svc.store,
        id,
        token,
        body,
        None if content_type is None else content_type[:MAX_CONTENT_TYPE],
    )
    return {"job_id": job_id}
