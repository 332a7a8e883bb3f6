"""Routes: workers, leaders, the audit trail, app settings, variables, health and metrics."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from tickwork.api.contract import answer
from tickwork.api.inputs import CursorQuery
from tickwork.api.schemas import (
    AuditPage,
    HealthOut,
    Instant,
    ReadyOut,
    RouteRoleOut,
    SamplePage,
    SettingIn,
    VariableIn,
)
from tickwork.api.security import ROUTE_ROLES, Services, caller, services
from tickwork.auth import Principal
from tickwork.db.driver_errors import translating
from tickwork.errors import DatabaseError, DatabaseUnavailable
from tickwork.ops import appconfig, samples
from tickwork.ops.audit import AuditFilter, list_events
from tickwork.ops.health import Health, check
from tickwork.ops.metrics import render
from tickwork.queue import admin
from tickwork.services.leases import leaders
from tickwork.types import Leader

router = APIRouter()
probes = APIRouter()
"""/healthz and /readyz: in every API, the webhook-only one too."""

READY_TIMEOUT = 0.5
"""Seconds /readyz waits for the database in all (a connection, then its answer) before it
answers 503: the documented bound of the probe."""

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]


@router.get("/api/workers", response_model=list[admin.WorkerInfo], tags=["cluster"])
async def list_workers(svc: Svc) -> list[admin.WorkerInfo]:
    """Live worker processes: queues, concurrency, attempts in flight, last heartbeat."""
    return await admin.list_workers(svc.pool, svc.store)


@router.get("/api/workers/metrics", response_model=SamplePage, tags=["cluster"])
async def list_worker_metrics(
    svc: Svc,
    worker_id: UUID | None = None,
    start: Annotated[Instant | None, Query(alias="from")] = None,
    end: Annotated[Instant | None, Query(alias="to")] = None,
    limit: Annotated[int, Query(ge=1, le=admin.MAX_PAGE)] = 100,
    before_id: CursorQuery = None,
) -> dict[str, Any]:
    """The processes' CPU and memory samples, newest first: of one worker, in a time range
    (``worker.metrics_interval`` apart; kept ``retention.worker_metrics_after``)."""
    items, cursor = await samples.page(
        svc.pool,
        svc.store,
        worker_id=worker_id,
        start=start,
        end=end,
        before_id=before_id,
        limit=limit,
    )
    return {"items": items, "next_before_id": cursor}


@router.get("/api/health", response_model=Health, tags=["operations"])
async def get_health(svc: Svc) -> Health:
    """The ``tickwork doctor`` report: table sizes and dead rows, what holds back vacuum,
    jobs no live worker claims, and the warnings drawn from them."""
    async with svc.pool.connection() as conn:
        return await check(conn, svc.store)


@router.get("/api/routes", response_model=list[RouteRoleOut], tags=["me"])
async def list_route_roles() -> list[dict[str, Any]]:
    """Every route of this API with the least role that may call it (null: public): the
    table every request is checked against, so a client (the dashboard) can leave out what
    the caller's role would be refused."""
    return [
        {"method": method, "path": path, "role": None if role is None else role.name}
        for (method, path), role in sorted(ROUTE_ROLES.items())
    ]


@router.get("/api/leaders", response_model=list[Leader], tags=["cluster"])
async def list_leaders(svc: Svc) -> list[Leader]:
    """Who holds each leader lease, and until when."""
    return await leaders(svc.pool, svc.store)


@router.get("/api/audit", response_model=AuditPage, tags=["audit"])
async def list_audit(
    svc: Svc,
    actor: str | None = None,
    event_type: str | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
    occurred_from: Annotated[Instant | None, Query(alias="from")] = None,
    occurred_to: Annotated[Instant | None, Query(alias="to")] = None,
    limit: Annotated[int, Query(ge=1, le=admin.MAX_PAGE)] = admin.DEFAULT_PAGE,
    before_id: CursorQuery = None,
) -> admin.Page:
    """The audit trail, newest first (OPERATOR and ADMIN only)."""
    where = AuditFilter(actor, event_type, target_type, target_id, occurred_from, occurred_to)
    return await list_events(svc.pool, svc.store, where, limit=limit, before_id=before_id)


@router.get("/api/settings", response_model=list[appconfig.SettingView], tags=["settings"])
async def list_settings(svc: Svc) -> list[appconfig.SettingView]:
    """Every setting operators may change, with its effective value and default."""
    return await appconfig.list_settings(svc.pool, svc.store, svc.app.settings)


@router.put("/api/settings/{key}", response_model=appconfig.SettingView, tags=["settings"])
async def put_setting(key: str, body: SettingIn, svc: Svc, who: Caller) -> appconfig.SettingView:
    """Change a setting (takes effect at the next pass of what reads it)."""
    return await appconfig.put_setting(
        svc.pool, svc.store, svc.app.settings, key, body.value, who.actor
    )


@router.get("/api/variables", response_model=list[appconfig.Variable], tags=["settings"])
async def list_variables(svc: Svc) -> list[appconfig.Variable]:
    """Global variables; a secret one's value is never returned."""
    return await appconfig.list_variables(svc.pool, svc.store)


@router.put("/api/variables/{name}", response_model=appconfig.Variable, tags=["settings"])
async def put_variable(name: str, body: VariableIn, svc: Svc, who: Caller) -> appconfig.Variable:
    """Create or replace a variable."""
    return await appconfig.put_variable(
        svc.pool, svc.store, name, body.value, secret=body.secret, actor=who.actor
    )


@router.delete(
    "/api/variables/{name}",
    status_code=204,
    tags=["settings"],
    responses=answer(404, "No variable with this name"),
)
async def delete_variable(name: str, svc: Svc, who: Caller) -> Response:
    """Delete a variable."""
    await appconfig.delete_variable(svc.pool, svc.store, name, actor=who.actor)
    return Response(status_code=204)


@probes.get("/healthz", response_model=HealthOut, tags=["operations"])
async def healthz() -> dict[str, Any]:
    """The process is up."""
    return {"status": "ok"}


@probes.get("/readyz", response_model=ReadyOut, tags=["operations"])
async def readyz(svc: Svc) -> dict[str, Any]:
    """The database answers and the schema is migrated (503 otherwise, within
    :data:`READY_TIMEOUT`: a probe must not wait out the requests' database wait, nor a
    network that silently drops packets)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_TIMEOUT

    async def look() -> list[dict[str, Any]]:
        try:
            with translating():
                wait = max(0.001, deadline - loop.time())  # the connection's share of it
                async with svc.pool.connection(timeout=wait) as conn:
                    return await svc.store.migration_applied(conn)
        except DatabaseError as exc:
            if isinstance(exc, DatabaseUnavailable):
                raise
            # e.g. no migrations table: the schema was never migrated, the process is not ready
            raise DatabaseUnavailable(f"the schema is not ready: {exc}") from exc

    # not wait_for: cancelling a query on a dead network waits for its cancel request
    probe = asyncio.ensure_future(look())
    done, _ = await asyncio.wait({probe}, timeout=max(0.0, deadline - loop.time()))
    if not done:
        probe.add_done_callback(_consume)  # it ends on its own (keepalives, timeouts)
        probe.cancel()
        raise DatabaseUnavailable(f"the database did not answer within {READY_TIMEOUT:g} s")
    found = probe.result()
    return {"status": "ready", "schema_version": max((r["version"] for r in found), default=0)}


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a late failure of an abandoned probe is not an error


@router.get(
    "/metrics",
    tags=["operations"],
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def get_metrics(svc: Svc) -> Response:
    """Prometheus exposition: jobs by state and queue, per-task counters, durations, pickup
    latency, lease holders."""
    body, content_type = await render(svc.pool, svc.store, svc.reported_statements)
    return Response(body, media_type=content_type)
