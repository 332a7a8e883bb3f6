"""Routes: schedules (list, detail, create, edit, delete, pause, resume, trigger)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from tickwork.api.contract import answer
from tickwork.api.schemas import JobOut, ScheduleEditIn, ScheduleIn, ScheduleOut
from tickwork.api.security import Services, caller, services
from tickwork.auth import Principal
from tickwork.db.loaders import Undecodable
from tickwork.limits import too_deep
from tickwork.queue import admin as queue_admin
from tickwork.queue.options import TaskOptions
from tickwork.queue.rows import call_args, servable
from tickwork.schedule import admin
from tickwork.schedule.records import StoredSchedule

router = APIRouter(tags=["schedules"])

NO_SCHEDULE = answer(404, "No schedule with this name")

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]


def _shown(schedule: StoredSchedule) -> StoredSchedule:
    """A schedule as served: arguments stored before the depth limit, too deep to be
    served, are left out and named in ``omitted`` (the stored row is untouched); arguments
    that cannot be decoded, or are not an object, are ``{"undecodable": why}``, named too."""
    args = call_args(schedule.args)
    if isinstance(args, Undecodable):
        return replace(schedule, args=args, omitted=("args",))
    if not too_deep(args):
        return schedule
    return replace(schedule, args={}, omitted=("args",))


async def _task_checker(svc: Services) -> admin.CheckTask:
    """Checks a schedule's task: one of the serving app's (its arguments checked against the
    handler), or one a worker seen in the last day defines (as that worker recorded it)."""
    async with svc.pool.connection() as conn:
        fleet = await queue_admin.known_tasks(conn, svc.store)

    def check(task: str, args: Mapping[str, Any]) -> TaskOptions:
        if task not in svc.app.tasks and task in fleet:
            return TaskOptions.from_stored(fleet[task])
        known = svc.app.get_task(task)  # unknown task: 400
        known.check_args(args)  # unfit arguments: 400
        return known.options

    return check


@router.get("/api/schedules", response_model=list[ScheduleOut])
async def list_schedules(svc: Svc) -> list[StoredSchedule]:
    """Every stored schedule (defined in code or by operators), by name."""
    return [_shown(s) for s in await admin.list_all(svc.pool, svc.store)]


@router.post(
    "/api/schedules",
    response_model=ScheduleOut,
    status_code=201,
    responses=answer(409, "A schedule with this name exists"),
)
async def create_schedule(body: ScheduleIn, svc: Svc, who: Caller) -> StoredSchedule:
    """Store a schedule of a task the serving app or a worker seen in the last day defines."""
    return await admin.create(
        svc.pool,
        svc.store,
        body.model_dump(),
        check_task=await _task_checker(svc),
        actor=who.actor,
        min_interval=svc.app.settings.scheduler.min_interval,
    )


@router.get("/api/schedules/{name}", response_model=ScheduleOut, responses=NO_SCHEDULE)
async def get_schedule(name: str, svc: Svc) -> StoredSchedule:
    """One stored schedule."""
    return _shown(await admin.get(svc.pool, svc.store, name))


@router.patch(
    "/api/schedules/{name}",
    response_model=ScheduleOut,
    responses=NO_SCHEDULE | answer(409, "The schedule is defined in code"),
)
async def edit_schedule(name: str, body: ScheduleEditIn, svc: Svc, who: Caller) -> StoredSchedule:
    """Change an operator-stored schedule (a schedule defined in code answers 409)."""
    edited = await admin.edit(
        svc.pool,
        svc.store,
        name,
        body.model_dump(exclude_unset=True),
        check_task=await _task_checker(svc),
        actor=who.actor,
        min_interval=svc.app.settings.scheduler.min_interval,
    )
    return _shown(edited)


@router.delete(
    "/api/schedules/{name}",
    status_code=204,
    responses=NO_SCHEDULE | answer(409, "The schedule is defined in code a live worker runs"),
)
async def delete_schedule(name: str, svc: Svc, who: Caller) -> Response:
    """Delete a schedule; its jobs stay as history. One defined in code answers 409 while a
    live worker defines it, and is deleted once none does (its code is gone)."""
    await admin.delete(svc.pool, svc.store, name, actor=who.actor)
    return Response(status_code=204)


async def _set_paused(svc: Services, name: str, paused: bool, who: Principal) -> Any:
    return _shown(await admin.set_paused(svc.pool, svc.store, name, paused, actor=who.actor))


@router.post("/api/schedules/{name}/pause", response_model=ScheduleOut, responses=NO_SCHEDULE)
async def pause_schedule(name: str, svc: Svc, who: Caller) -> Any:
    """Stop materialising jobs until resumed (survives restarts)."""
    return await _set_paused(svc, name, True, who)


@router.post("/api/schedules/{name}/resume", response_model=ScheduleOut, responses=NO_SCHEDULE)
async def resume_schedule(name: str, svc: Svc, who: Caller) -> Any:
    """Materialise jobs again."""
    return await _set_paused(svc, name, False, who)


@router.post(
    "/api/schedules/{name}/trigger", response_model=JobOut, status_code=201, responses=NO_SCHEDULE
)
async def trigger_schedule(name: str, svc: Svc, who: Caller) -> Any:
    """Enqueue one job of the schedule now, outside its cron."""
    job_id = await admin.trigger(
        svc.pool, svc.store, name, registered=svc.app.registered, actor=who.actor
    )
    return servable(await queue_admin.get_job(svc.pool, svc.store, job_id))
