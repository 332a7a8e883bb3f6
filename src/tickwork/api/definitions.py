"""Routes: definitions (operator-stored HTTP and script jobs): list, create, read, edit,
delete, pause, resume, run now."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from tickwork.api.contract import answer
from tickwork.api.inputs import CursorQuery, IdPath
from tickwork.api.paths import mounted_at
from tickwork.api.schemas import (
    ActivityOut,
    DefinitionOut,
    DefinitionPage,
    Instant,
    RunOut,
    WebhookOut,
)
from tickwork.api.security import Services, caller, services
from tickwork.auth import Principal
from tickwork.definitions import admin
from tickwork.definitions.records import Definition, DefinitionEditIn, DefinitionIn
from tickwork.queue.admin import MAX_PAGE

router = APIRouter(tags=["definitions"])

NO_DEFINITION = answer(404, "No definition with this id")

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]


@router.get("/api/definitions", response_model=DefinitionPage)
async def list_definitions(
    svc: Svc,
    kind: Literal["http", "script"] | None = None,
    enabled: bool | None = None,
    name: Annotated[str | None, Query(max_length=200, description="a part of the name")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    after: CursorQuery = None,
) -> dict[str, Any]:
    """Definitions by id, filtered by kind, enabled and a part of the name (any case)."""
    items, cursor = await admin.page(
        svc.pool, svc.store, kind=kind, enabled=enabled, name=name, after=after or 0, limit=limit
    )
    return {"items": items, "next_cursor": cursor}


@router.post(
    "/api/definitions",
    response_model=DefinitionOut,
    status_code=201,
    responses=answer(409, "A definition with this name exists"),
)
async def create_definition(body: DefinitionIn, svc: Svc, who: Caller) -> Definition:
    """Store an HTTP or script definition (ADMIN: a script runs code on the workers)."""
    given = body.model_dump(exclude_unset=True)
    return await admin.create(
        svc.pool,
        svc.store,
        given,
        actor=who.actor,
        min_interval=svc.app.settings.scheduler.min_interval,
    )


@router.get("/api/definitions/{id}", response_model=DefinitionOut, responses=NO_DEFINITION)
async def get_definition(id: IdPath, svc: Svc) -> Definition:
    """One definition."""
    return await admin.get(svc.pool, svc.store, id)


@router.patch(
    "/api/definitions/{id}",
    response_model=DefinitionOut,
    responses=NO_DEFINITION | answer(409, "Another definition has this name"),
)
async def edit_definition(id: IdPath, body: DefinitionEditIn, svc: Svc, who: Caller) -> Any:
    """Change some fields (the next run uses them; a run already made keeps its version).
    ``cron`` and ``loop`` may be null (removed)."""
    changes = body.model_dump(exclude_unset=True)
    return await admin.edit(
        svc.pool,
        svc.store,
        id,
        changes,
        actor=who.actor,
        min_interval=svc.app.settings.scheduler.min_interval,
    )


@router.delete("/api/definitions/{id}", status_code=204, responses=NO_DEFINITION)
async def delete_definition(id: IdPath, svc: Svc, who: Caller) -> Response:
    """Delete a definition and its schedule; its runs stay as jobs."""
    await admin.delete(svc.pool, svc.store, id, actor=who.actor)
    return Response(status_code=204)


@router.post("/api/definitions/{id}/pause", response_model=DefinitionOut, responses=NO_DEFINITION)
async def pause_definition(id: IdPath, svc: Svc, who: Caller) -> Any:
    """Stop scheduling it and refuse its webhook until resumed (run now still works)."""
    return await admin.set_enabled(svc.pool, svc.store, id, False, actor=who.actor)


@router.post("/api/definitions/{id}/resume", response_model=DefinitionOut, responses=NO_DEFINITION)
async def resume_definition(id: IdPath, svc: Svc, who: Caller) -> Any:
    """Schedule it again from its next fire time after now."""
    return await admin.set_enabled(svc.pool, svc.store, id, True, actor=who.actor)


@router.post(
    "/api/definitions/{id}/run", response_model=RunOut, status_code=202, responses=NO_DEFINITION
)
async def run_definition(id: IdPath, svc: Svc, who: Caller) -> dict[str, int]:
    """Enqueue one run now with the definition as it is; the run's job id."""
    return {"job_id": await admin.run_now(svc.pool, svc.store, id, actor=who.actor)}


@router.post(
    "/api/definitions/{id}/webhook",
    response_model=WebhookOut,
    status_code=201,
    responses=NO_DEFINITION,
)
async def set_definition_webhook(
    id: IdPath, request: Request, svc: Svc, who: Caller
) -> dict[str, str]:
    """Give the definition a webhook with a new token (an earlier one stops working). The
    token is shown in this answer only."""
    token = await admin.set_webhook(svc.pool, svc.store, id, actor=who.actor)
    return {"path": mounted_at(request.scope) + admin.webhook_path(id, token), "token": token}


@router.delete("/api/definitions/{id}/webhook", status_code=204, responses=NO_DEFINITION)
async def remove_definition_webhook(id: IdPath, svc: Svc, who: Caller) -> Response:
    """Remove the definition's webhook: its token stops working."""
    await admin.remove_webhook(svc.pool, svc.store, id, actor=who.actor)
    return Response(status_code=204)


@router.get("/api/definitions/{id}/activity", response_model=ActivityOut, responses=NO_DEFINITION)
async def get_definition_activity(
    id: IdPath,
    svc: Svc,
    start: Annotated[Instant | None, Query(alias="from", description="default: to - 24h")] = None,
    end: Annotated[Instant | None, Query(alias="to", description="default: now")] = None,
    bucket: Literal["minute", "hour", "day"] = "hour",
) -> dict[str, Any]:
    """The definition's runs from ``from`` to ``to`` (ISO 8601; UTC when no zone is given)
    in buckets of a minute, an hour or a day: attempts ended, succeeded, failed, durations
    (at most 10,000 buckets)."""
    return await admin.activity(svc.pool, svc.store, id, start=start, end=end, bucket=bucket)
