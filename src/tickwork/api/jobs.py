"""Routes: jobs (list, detail, enqueue, retry, cancel, delete, bulk) and queues (stats, pause)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from tickwork.api.contract import answer
from tickwork.api.inputs import CursorQuery, IdPath
from tickwork.api.schemas import (
    QUEUE_PATTERN,
    BulkOut,
    EnqueueIn,
    Instant,
    JobDetailOut,
    JobFilterIn,
    JobOut,
    JobPage,
    JobStateName,
    JobStateQuery,
    NotStoredProblem,
    ThroughputOut,
)
from tickwork.api.security import Services, caller, services
from tickwork.auth import Principal
from tickwork.db.driver_errors import DriverError, enqueue_error
from tickwork.definitions.records import refuse_runtime_task
from tickwork.errors import UnknownTaskError
from tickwork.ops.audit import audit_append
from tickwork.queue import admin
from tickwork.queue.admin import JobFilter
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.rows import servable, summarised

router = APIRouter()

NO_JOB = answer(404, "No job with this id")

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]


@router.get("/api/jobs", response_model=JobPage, tags=["jobs"])
async def list_jobs(
    svc: Svc,
    state: Annotated[
        list[JobStateQuery] | None,
        Query(description="repeat for several (a comma-separated list is taken too)"),
    ] = None,
    queue: Annotated[str | None, Query(pattern=QUEUE_PATTERN)] = None,
    task: str | None = None,
    schedule: Annotated[str | None, Query(description="schedule name")] = None,
    created_from: Instant | None = None,
    created_to: Instant | None = None,
    finished_from: Instant | None = None,
    finished_to: Instant | None = None,
    limit: Annotated[int, Query(ge=1, le=admin.MAX_PAGE)] = admin.DEFAULT_PAGE,
    before_id: CursorQuery = None,
    count: Annotated[
        bool, Query(description="also count the matches, up to 10,000 (`total`)")
    ] = False,
    q: Annotated[
        str | None,
        Query(
            max_length=admin.MAX_SEARCH_TEXT,
            description="text to search for in the id, task, unique key, creator, arguments,"
            " result and errors (any case; up to 200 characters); `#42`: job 42 only",
        ),
    ] = None,
) -> admin.Page:
    """Jobs, newest first. Unknown filter values are refused (400), never ignored. With
    ``count=true`` the page carries ``total``: how many jobs match the filters, exact up to
    10,000, else ``capped`` (a count reads every match, so it is made only when asked).

    A text search (``q``) looks through the 20,000 newest jobs the other filters select on
    each page: a page may hold fewer matches than ``limit`` and still carry a
    ``next_cursor``, from which the search goes on through older jobs."""
    where = JobFilter.parse(
        state=state,
        queue=queue,
        task=task,
        schedule=schedule,
        created_from=created_from,
        created_to=created_to,
        finished_from=finished_from,
        finished_to=finished_to,
    )
    return await admin.list_jobs(
        svc.pool, svc.store, where, limit=limit, before_id=before_id, count=count, text=q
    )


NO_SUCH_TASK = (
    "neither this server's app nor a worker seen in the last day defines it: start a worker"
    " whose app does (tickwork worker --app module:app), or serve --app module:app"
)


@router.post(
    "/api/jobs",
    response_model=JobOut,
    status_code=201,
    tags=["jobs"],
    responses=answer(200, "A job holds the unique_key already: that job", JobOut)
    | answer(
        503,
        "Database unavailable; `stored` says whether the job was stored (retry after"
        " Retry-After seconds)",
        NotStoredProblem,
    ),
)
async def enqueue_job(body: EnqueueIn, svc: Svc, who: Caller, response: Response) -> object:
    """Enqueue a job of a task that the serving app or a worker seen in the last day defines
    (a `serve` without the application enqueues for its workers). The tasks that run
    definitions are refused: their runs come from the stored definition."""
    refuse_runtime_task(body.task)
    spec = JobSpec(
        body.task,
        body.args,
        body.queue,
        body.priority,
        body.max_attempts,
        body.run_at,
        body.timeout,
        body.unique_key,
    )
    committing = False  # once the transaction's block is left, its commit is under way
    try:
        async with svc.pool.connection() as conn, conn.transaction():
            elsewhere = body.task not in svc.app.tasks
            known = await admin.known_tasks(conn, svc.store) if elsewhere else {}
            if elsewhere and body.task not in known:
                raise UnknownTaskError(body.task, [*svc.app.tasks, *known], hint=NO_SUCH_TASK)
            job = (
                await svc.app.enqueue_many_async(
                    [spec], conn=conn, created_by=who.actor, any_task=elsewhere, defaults=known
                )
            )[0]
            if job.duplicate:  # the job holding the unique_key, not a new one
                response.status_code = 200
            else:
                await audit_append(
                    conn, svc.store, who.actor, "job.enqueued", "job", str(job.id), {}
                )
            committing = True
    except DriverError as exc:  # (the enqueue itself translates its own, as not stored)
        raise enqueue_error(exc, committing=committing) from exc
    return summarised(job)


def _filter(body: JobFilterIn) -> JobFilter:
    return JobFilter.parse(
        state=list(body.state) if body.state else None,
        queue=body.queue,
        task=body.task,
        schedule=body.schedule,
        created_from=body.created_from,
        created_to=body.created_to,
        finished_from=body.finished_from,
        finished_to=body.finished_to,
    )


@router.post("/api/jobs/bulk/retry", response_model=BulkOut, tags=["jobs"])
async def bulk_retry_jobs(body: JobFilterIn, svc: Svc, who: Caller) -> admin.BulkResult:
    """Retry every DEAD_LETTER or FAILED job the filter selects (at most 10,000). At least
    one filter field, or `all: true`, is required: `{}` is refused (400)."""
    return await admin.bulk(svc.pool, svc.store, "retry", _filter(body), who.actor, every=body.all)


@router.post("/api/jobs/bulk/cancel", response_model=BulkOut, tags=["jobs"])
async def bulk_cancel_jobs(body: JobFilterIn, svc: Svc, who: Caller) -> admin.BulkResult:
    """Cancel every job the filter selects that can still be cancelled (at most 10,000). At
    least one filter field, or `all: true`, is required: `{}` is refused (400)."""
    return await admin.bulk(svc.pool, svc.store, "cancel", _filter(body), who.actor, every=body.all)


@router.get("/api/jobs/{job_id}", response_model=JobDetailOut, tags=["jobs"], responses=NO_JOB)
async def get_job(job_id: IdPath, svc: Svc) -> dict[str, object]:
    """One job with every attempt (worker, lease, timings, error)."""
    job = await admin.get_job(svc.pool, svc.store, job_id)
    executions = await admin.executions(svc.pool, svc.store, job_id)
    return JobOut.model_validate(servable(job)).model_dump() | {"executions": executions}


@router.get(
    "/api/jobs/{job_id}/timeline",
    response_model=list[admin.TimelineEntry],
    tags=["jobs"],
    responses=NO_JOB,
)
async def get_job_timeline(job_id: IdPath, svc: Svc) -> list[admin.TimelineEntry]:
    """The job's life in time order, with actors: created, each attempt claimed and ended
    (from its executions), and its audit trail (operators' actions, reclaims, a dead
    letter)."""
    return await admin.job_timeline(svc.pool, svc.store, job_id)


async def _act(svc: Services, operation: str, job_id: int, who: Principal) -> object:
    return servable(await admin.change_job(svc.pool, svc.store, operation, job_id, who.actor))


@router.post(
    "/api/jobs/{job_id}/retry",
    response_model=JobOut,
    tags=["jobs"],
    responses=NO_JOB
    | answer(
        409,
        "The job is neither DEAD_LETTER nor FAILED, or it runs a definition that was deleted",
    ),
)
async def retry_job(job_id: IdPath, svc: Svc, who: Caller) -> object:
    """Send a DEAD_LETTER or FAILED job back to PENDING now."""
    return await _act(svc, "retry", job_id, who)


@router.post(
    "/api/jobs/{job_id}/cancel",
    response_model=JobOut,
    tags=["jobs"],
    responses=NO_JOB | answer(409, "The job has finished (SUCCEEDED, CANCELLED, DEAD_LETTER)"),
)
async def cancel_job(job_id: IdPath, svc: Svc, who: Caller) -> object:
    """Cancel a pending job at once; a running one when its attempt completes."""
    return await _act(svc, "cancel", job_id, who)


@router.delete(
    "/api/jobs/{job_id}",
    status_code=204,
    tags=["jobs"],
    responses=NO_JOB | answer(409, "The job is RUNNING: cancel it, and delete it once it ends"),
)
async def delete_job(job_id: IdPath, svc: Svc, who: Caller) -> Response:
    """Delete a job that is not RUNNING, with its attempts. The audit trail keeps who deleted
    it (``job.deleted``, with the job's task, queue and state): ``GET
    /api/audit?target_type=job&target_id=<id>``; the job's own routes answer 404 naming
    them."""
    await admin.delete_job(svc.pool, svc.store, job_id, who.actor)
    return Response(status_code=204)


@router.get("/api/queues", response_model=list[admin.QueueStats], tags=["queues"])
async def list_queues(svc: Svc) -> list[admin.QueueStats]:
    """Every queue: jobs by state, the oldest waiting job's age, recent throughput, pause."""
    return await admin.queue_stats(svc.pool, svc.store)


@router.get("/api/queues/throughput", response_model=ThroughputOut, tags=["queues"])
async def get_queue_throughput(
    svc: Svc,
    queue: Annotated[str | None, Query(pattern=QUEUE_PATTERN)] = None,
    start: Annotated[Instant | None, Query(alias="from", description="default: to - 24h")] = None,
    end: Annotated[Instant | None, Query(alias="to", description="default: now")] = None,
    bucket: Literal["minute", "hour", "day"] = "hour",
) -> dict[str, Any]:
    """Finished work per queue (or of one ``queue``) from ``from`` to ``to`` (ISO 8601; UTC
    when no zone is given) in buckets of a minute, an hour or a day: jobs that succeeded, were
    dead-lettered or cancelled, attempts that failed with a retry due (at most 10,000 buckets;
    kept ``retention.throughput_after``, 7 days)."""
    return await admin.throughput(
        svc.pool, svc.store, queue=queue, start=start, end=end, bucket=bucket
    )


@router.post("/api/queues/{name}/pause", status_code=204, tags=["queues"])
async def pause_queue(name: str, svc: Svc, who: Caller) -> Response:
    """Stop workers claiming from this queue (running jobs finish); survives restarts."""
    await admin.set_queue_paused(svc.pool, svc.store, name, True, who.actor)
    return Response(status_code=204)


@router.post("/api/queues/{name}/resume", status_code=204, tags=["queues"])
async def resume_queue(name: str, svc: Svc, who: Caller) -> Response:
    """Let workers claim from this queue again."""
    await admin.set_queue_paused(svc.pool, svc.store, name, False, who.actor)
    return Response(status_code=204)


__all__ = ["JobStateName", "router"]
