"""Routes: the signals admin API at /api/admin/signals (ADMIN only).

A 409 here is a routing answer, not a failure: the operation is valid but this process does
not hold the lease it needs (GET /api/admin/signals/leaders names the process that does).
Runtime overrides are per process and lost on restart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from tickwork.api.contract import answer
from tickwork.api.inputs import CursorQuery, IdPath
from tickwork.api.schemas import NoHolderProblem, NotLeaderProblem, Request, SupersededProblem
from tickwork.api.security import Services, caller, services
from tickwork.auth import Principal
from tickwork.config import MAX_SECONDS
from tickwork.errors import NotFoundError, NotLeaderError
from tickwork.queue.admin import DEFAULT_PAGE, MAX_PAGE
from tickwork.services.leases import Role, holder_of
from tickwork.services.leases import leaders as all_leaders
from tickwork.signals import admin
from tickwork.signals.control import PROCESSOR, SWEEPS, RuntimeControl, reactor_switch
from tickwork.signals.publisher import MAX_ENTITY_LENGTH
from tickwork.signals.records import Delivery, Signal, SignalStatus
from tickwork.signals.runtime import SignalRuntime

router = APIRouter(prefix="/api/admin/signals", tags=["signals"])

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]

NO_REACTOR = answer(404, "The SIGNAL_MASTER holder runs no reactor of this name")
NO_SIGNAL = answer(404, "No signal with this id")
NOT_LEADER = answer(
    409, "This process does not hold the lease the operation needs (see /leaders)", NotLeaderProblem
)
NO_HOLDER = answer(
    503,
    "No process holds the lease the switch applies to (see /leaders), or the database is"
    " unavailable; retry after Retry-After seconds",
    NoHolderProblem,
)
SUPERSEDED = answer(409, "A fresher PENDING signal holds the same type and key", SupersededProblem)


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class In(Request):
    """A request body as every other of the API: strictly typed (``{"enabled": "yes"}`` is a
    400, not true), no unknown fields, no text PostgreSQL cannot store."""


class SignalDetailOut(Out):
    signal: Signal
    deliveries: list[Delivery]


class SignalPage(Out):
    items: list[Signal]
    next_cursor: int | None


class StatsOut(Out):
    status: SignalStatus
    signal_type: str
    count: int
    oldest_created_at: datetime | None = Field(
        description="of the oldest PENDING or PROCESSING signal; null for COMPLETED and DEAD"
    )


class TieredBool(Out):
    config: bool
    override: bool | None
    effective: bool


class TieredSet(Out):
    config: list[str]
    override: list[str] | None
    effective: list[str]


class ReactorOut(Out):
    name: str
    handles: list[str]
    sweep_cron: str | None
    organisation_scoped: bool
    enabled: TieredBool
    dry_run: TieredBool
    organisations: TieredSet
    last_sweep: dict[str, Any] | None


class SweepOut(Out):
    reactor: str
    outcome: str
    dry_run: bool
    reason: str | None
    run_id: int | None


class SwitchIn(In):
    enabled: bool | None = Field(description="null: drop the override (back to the config)")


class DryRunIn(In):
    dry_run: bool | None = Field(description="null: drop the override (back to the config)")


def _organisation_text(value: str | int) -> str:
    """An organisation id as signals store it: an integer as its decimal text (``emit``
    accepts both, so ``7`` and ``"7"`` name the same organisation)."""
    text = str(value)
    if not 1 <= len(text) <= MAX_ENTITY_LENGTH:
        raise ValueError(f"must be 1-{MAX_ENTITY_LENGTH} characters")
    return text


OrganisationId = Annotated[str | int, AfterValidator(_organisation_text)]


MAX_ORGANISATIONS = 10_000
"""Most organisations one override names (it is stored, and read at every pass)."""


class OrganisationsIn(In):
    organisations: list[OrganisationId] | None = Field(
        max_length=MAX_ORGANISATIONS,
        description='organisation ids, text or integers (7 and "7" are the same); empty: no'
        " organisation; null: drop the override (back to the config)",
    )


class SignalLeaseOut(Out):
    name: str
    holder: str
    expires_at: datetime
    live: bool
    this_process: bool


class StatusOut(Out):
    enabled: bool
    processor: TieredBool
    sweeps: TieredBool
    holder_id: str | None
    holds: list[str]
    counts: dict[str, int]
    reactors: int


def _bool(t: Any) -> TieredBool:
    return TieredBool(config=t.config, override=t.override, effective=t.effective)


def _set(t: Any) -> TieredSet:
    return TieredSet(
        config=sorted(t.config),
        override=None if t.override is None else sorted(t.override),
        effective=sorted(t.effective),
    )


StatusQuery = Annotated[
    str,
    WithJsonSchema({"type": "string", "enum": [*(s.value for s in SignalStatus), admin.FAILED]}),
]
"""A signal status in a query, as the document gives it (the route takes any case and
comma-separated lists too, and refuses an unknown status itself, naming it)."""


@router.get("", response_model=SignalPage)
async def list_signals(
    svc: Svc,
    status: Annotated[
        list[StatusQuery] | None,
        Query(
            description="repeat for several (a comma-separated list is taken too); FAILED:"
            " the signals with a reactor that failed (FAILED awaiting its retry, or DEAD),"
            " whatever their own status"
        ),
    ] = None,
    signal_type: str | None = None,
    aggregate_key: str | None = None,
    organisation_id: str | None = None,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    before_id: CursorQuery = None,
) -> Any:
    """Signals, newest first; unknown filter values are refused (400)."""
    if signal_type is not None:
        await admin.check_signal_type(svc.pool, svc.store, svc.app.reactors, signal_type)
    where = admin.SignalFilter.parse(
        status=status,
        signal_type=signal_type,
        aggregate_key=aggregate_key,
        organisation_id=organisation_id,
        created_from=created_from,
        created_to=created_to,
    )
    return await admin.list_signals(svc.pool, svc.store, where, limit=limit, before_id=before_id)


@router.get("/stats", response_model=list[StatsOut])
async def get_signal_stats(svc: Svc) -> Any:
    """Counts by status and type, with the oldest signal of each."""
    return await admin.stats(svc.pool, svc.store)


@router.get("/stuck", response_model=list[Signal])
async def list_stuck_signals(
    svc: Svc,
    older_than: Annotated[
        float | None, Query(le=MAX_SECONDS, description="seconds; default: stuck_after")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
) -> Any:
    """Signals PROCESSING beyond the threshold: a hung reactor or a processor that died."""
    default = svc.app.settings.signals.processor.stuck_after
    threshold = older_than if older_than is not None else default
    return await admin.stuck(svc.pool, svc.store, threshold, limit)


async def _held(svc: Services, lease: str) -> admin.HeldControl:
    """The switches of the process holding ``lease``, as it published them."""
    runtime = svc.signals
    local = runtime.control if runtime else RuntimeControl(svc.app.settings.signals)
    here = runtime.leases.holder_id if runtime else None
    return await admin.held_control(svc.pool, svc.store, lease, local, svc.app.reactors, here=here)


async def _known(svc: Services, name: str) -> None:
    """404 unless ``name`` is a reactor of the SIGNAL_MASTER holder (of this process when
    nobody holds it): an override for a reactor the holder does not run would apply to
    nothing while answering 204."""
    held = await _held(svc, Role.SIGNAL_MASTER)
    if all(r["name"] != name for r in held.reactors):
        raise NotFoundError("reactor", name)


async def _require(svc: Services, role: str) -> SignalRuntime:
    """This process's signal runtime, when it holds ``role``; else 409 naming the holder."""
    if svc.signals is None:
        raise NotLeaderError(role, await holder_of(svc.pool, svc.store, role))
    await svc.signals.require(role)
    return svc.signals


async def _switch(svc: Services, switch: str, value: Any, leases: list[str]) -> Response:
    """Store an override for the holders of ``leases`` (503 when nobody holds them); this
    process, when it is one of them, applies it before answering."""
    holders = await admin.set_switch(svc.pool, svc.store, switch, value, leases)
    if svc.signals is not None and svc.signals.leases.holder_id in holders:
        await svc.signals.sync_control()
    return Response(status_code=204)


BOTH: list[str] = [Role.SIGNAL_MASTER, Role.SWEEP_MASTER]
"""A reactor's switches apply to the processor and the sweeps: to the holders of both."""


@router.get("/reactors", response_model=list[ReactorOut])
async def list_reactors(svc: Svc) -> list[ReactorOut]:
    """The SIGNAL_MASTER holder's reactors (answered by any process): handled types, sweep
    cron, last sweep, and the config, runtime and effective enabled flag, dry-run flag and
    organisation set."""
    views = await admin.reactors_view(svc.pool, svc.store, await _held(svc, Role.SIGNAL_MASTER))
    return [
        ReactorOut(
            name=v.name,
            handles=v.handles,
            sweep_cron=v.sweep_cron,
            organisation_scoped=v.organisation_scoped,
            enabled=_bool(v.enabled),
            dry_run=_bool(v.dry_run),
            organisations=_set(v.organisations),
            last_sweep=v.last_sweep,
        )
        for v in views
    ]


@router.put("/reactors/{name}/enabled", status_code=204, responses=NO_REACTOR | NO_HOLDER)
async def set_reactor_enabled(name: str, body: SwitchIn, svc: Svc) -> Response:
    """Runtime toggle of one reactor, sent from any process to the lease holders (it lasts
    as long as they hold the leases: a restart or a new holder drops it)."""
    await _known(svc, name)
    return await _switch(svc, reactor_switch("enabled", name), body.enabled, BOTH)


@router.put(
    "/reactors/{name}/dry-run", status_code=204, responses=NO_REACTOR | NOT_LEADER | NO_HOLDER
)
async def set_reactor_dry_run(name: str, body: DryRunIn, svc: Svc) -> Response:
    """Runtime dry-run toggle (409 unless this process holds SIGNAL_MASTER)."""
    await _known(svc, name)
    await _require(svc, Role.SIGNAL_MASTER)
    return await _switch(svc, reactor_switch("dry_run", name), body.dry_run, BOTH)


@router.put(
    "/reactors/{name}/organisations",
    status_code=204,
    responses=NO_REACTOR | NOT_LEADER | NO_HOLDER,
)
async def set_reactor_organisations(name: str, body: OrganisationsIn, svc: Svc) -> Response:
    """Runtime override of the tenants one reactor may act for; an empty list pins it to
    none (409 unless this process holds SIGNAL_MASTER)."""
    await _known(svc, name)
    await _require(svc, Role.SIGNAL_MASTER)
    chosen = None if body.organisations is None else sorted(set(map(str, body.organisations)))
    return await _switch(svc, reactor_switch("organisations", name), chosen, BOTH)


@router.post("/reactors/{name}/sweep", response_model=SweepOut, responses=NO_REACTOR | NOT_LEADER)
async def sweep_reactor(name: str, svc: Svc) -> Any:
    """Run one reactor's sweep now: bypasses its schedule, not the SWEEP_MASTER lease."""
    await _known(svc, name)
    runtime = await _require(svc, Role.SWEEP_MASTER)
    return await runtime.sweeps.trigger(name)


@router.put("/processor/enabled", status_code=204, responses=NO_HOLDER)
async def set_signal_processor(body: SwitchIn, svc: Svc) -> Response:
    """Framework-level toggle of the signal processor, sent to the SIGNAL_MASTER holder."""
    return await _switch(svc, PROCESSOR, body.enabled, [str(Role.SIGNAL_MASTER)])


@router.put("/sweeps/enabled", status_code=204, responses=NO_HOLDER)
async def set_signal_sweeps(body: SwitchIn, svc: Svc) -> Response:
    """Framework-level toggle of the sweeps, sent to the SWEEP_MASTER holder."""
    return await _switch(svc, SWEEPS, body.enabled, [str(Role.SWEEP_MASTER)])


@router.get("/status", response_model=StatusOut)
async def get_signal_status(svc: Svc) -> StatusOut:
    """The whole framework (answered by any process): the processor's switch as the
    SIGNAL_MASTER holder has it, the sweeps' as the SWEEP_MASTER holder has it, the leases
    this process holds, counts by status."""
    counts: dict[str, int] = {}
    for row in await admin.stats(svc.pool, svc.store):
        counts[row.status.value] = counts.get(row.status.value, 0) + row.count
    runtime = svc.signals
    signal_master = await _held(svc, Role.SIGNAL_MASTER)
    sweep_master = await _held(svc, Role.SWEEP_MASTER)
    return StatusOut(
        enabled=svc.app.settings.signals.enabled,
        processor=_bool(signal_master.switches.processor()),
        sweeps=_bool(sweep_master.switches.sweeps()),
        holder_id=runtime.leases.holder_id if runtime else None,
        holds=sorted(runtime.leases.held) if runtime else [],
        counts=counts,
        reactors=len(signal_master.reactors),
    )


@router.get("/leaders", response_model=list[SignalLeaseOut])
async def list_signal_leaders(svc: Svc) -> list[SignalLeaseOut]:
    """Which process holds SIGNAL_MASTER and SWEEP_MASTER: where to reissue a 409."""
    found = await all_leaders(svc.pool, svc.store)
    mine = svc.signals.leases.holder_id if svc.signals else None
    return [
        SignalLeaseOut(
            name=f.name,
            holder=f.holder,
            expires_at=f.expires_at,
            live=f.live,
            this_process=f.holder == mine,
        )
        for f in found
        if f.name in (Role.SIGNAL_MASTER, Role.SWEEP_MASTER)
    ]


@router.get("/{signal_id}", response_model=SignalDetailOut, responses=NO_SIGNAL)
async def get_signal(signal_id: IdPath, svc: Svc) -> Any:
    """One signal with its per-reactor delivery (which reactor failed, and why)."""
    return await admin.get_signal(svc.pool, svc.store, signal_id)


@router.post("/{signal_id}/retry", response_model=Signal, responses=NO_SIGNAL | SUPERSEDED)
async def retry_signal(signal_id: IdPath, svc: Svc, who: Caller) -> Any:
    """Reset a DEAD signal to PENDING. 409 when a fresher PENDING signal holds the same type
    and key: ``supersededByPendingId`` names it, the work is queued, the DEAD row stays."""
    return await admin.retry(svc.pool, svc.store, signal_id, who.actor)


@router.post(
    "/{signal_id}/reactors/{name}/retry",
    response_model=Signal,
    responses=answer(404, "No signal with this id, or no delivery of it to this reactor"),
)
async def retry_signal_delivery(signal_id: IdPath, name: str, svc: Svc, who: Caller) -> Any:
    """Run one reactor's DEAD delivery of a signal again: the delivery starts afresh, the
    signal is due now; the reactors that completed are not run again (400 unless the
    delivery is DEAD, and unless the SIGNAL_MASTER holder runs the reactor enabled)."""
    held = await _held(svc, Role.SIGNAL_MASTER)
    return await admin.retry_delivery(svc.pool, svc.store, signal_id, name, who.actor, held=held)


@router.post("/{signal_id}/cancel", response_model=Signal, responses=NO_SIGNAL)
async def cancel_signal(signal_id: IdPath, svc: Svc, who: Caller) -> Any:
    """Mark a PENDING signal COMPLETED without processing it."""
    return await admin.cancel(svc.pool, svc.store, signal_id, who.actor)
