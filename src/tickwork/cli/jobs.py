"""``tickwork jobs``: list jobs, show one with its attempts, enqueue, retry, cancel or delete
one, straight on the database without the HTTP API.

The commands call the library functions the API calls (:mod:`tickwork.queue.admin`, the
:class:`~tickwork.app.App` job actions), so the same rules and audit events apply; the audit
trail names the actor ``cli:<login name>``. ``--json`` prints the API's response models
(:mod:`tickwork.api.schemas`), so both answer in one shape.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer
from psycopg_pool import AsyncConnectionPool
from pydantic import TypeAdapter

from tickwork import logs
from tickwork.app import App
from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    YesOption,
    cli_actor,
    load_app,
    print_json,
    print_table,
    run_with_pool,
    utc_time,
)
from tickwork.errors import ConfigError, UnknownTaskError
from tickwork.ops.audit import audit_append
from tickwork.queue import admin
from tickwork.queue.admin import TimelineEntry
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.rows import summarised
from tickwork.types import ErrorInfo, Job, JobState, Progress

__all__ = ["jobs_cli"]

JobId = Annotated[int, typer.Argument(metavar="ID", help="The job's id.")]

jobs_cli = typer.Typer(
    help="List jobs, show one with its attempts, enqueue, retry, cancel or delete one.",
    no_args_is_help=True,
    cls=Group,
)


def _error(error: ErrorInfo | None) -> str:
    return f"{error.type}: {error.message}" if error else "-"


@jobs_cli.command("list")
def jobs_list(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="PENDING, RUNNING, ... (repeat or comma-separate)."),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Exactly this queue.")] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="Exactly this task.")] = None,
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Made by this stored schedule (its name).")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help=f"Jobs per page (1 to {admin.MAX_PAGE}).")
    ] = admin.DEFAULT_PAGE,
    before_id: Annotated[
        int | None, typer.Option("--before-id", help="Only jobs older than this id (next page).")
    ] = None,
    count: Annotated[
        bool,
        typer.Option(
            "--count", help=f"Also count the matches (up to {admin.MAX_COUNT:,}; reads them all)."
        ),
    ] = False,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            help="Text in the id, task, unique key, creator, arguments, result or errors"
            f" (each page looks through the {admin.SEARCH_WINDOW:,} newest jobs at most).",
        ),
    ] = None,
    as_json: JsonOption = False,
    app: AppOption = None,
) -> None:
    """Jobs, newest first, a page at a time."""
    from tickwork.api.schemas import JobPage

    where = admin.JobFilter.parse(state=state, queue=queue, task=task, schedule=schedule)
    page = run_with_pool(
        app,
        lambda the_app, pool: admin.list_jobs(
            pool,
            the_app.db.store,
            where,
            limit=limit,
            before_id=before_id,
            count=count,
            text=search,
        ),
    )
    if as_json:
        print_json(JobPage.model_validate(page).model_dump(mode="json"))
        return
    print_table(
        "jobs",
        ("id", "state", "queue", "task", "attempts", "created (UTC)", "finished (UTC)"),
        (
            (
                str(j.id),
                j.state.value,
                j.queue,
                j.task,
                f"{j.attempts}/{j.max_attempts}",
                utc_time(j.created_at),
                utc_time(j.finished_at),
            )
            for j in page.items
        ),
    )
    if page.total is not None:
        typer.echo(f"{page.total.count:,}{'+' if page.total.capped else ''} jobs match")
    if page.next_cursor is not None:
        typer.echo(f"more: --before-id {page.next_cursor}")


def _progress(progress: Progress | None) -> str:
    if progress is None:
        return "-"
    done = f"{progress.current:g}"
    if progress.total is not None:
        done += f" of {progress.total:g}"
    if progress.fraction is not None:
        done += f" ({progress.fraction:.0%})"
    note = f": {progress.message}" if progress.message else ""
    return f"{done}{note} (attempt {progress.attempt}, {utc_time(progress.at)})"


@jobs_cli.command("show")
def jobs_show(job_id: JobId, as_json: JsonOption = False, app: AppOption = None) -> None:
    """One job with every attempt (worker, lease, timings, error) and its timeline: created,
    claims and outcomes, operators' actions, its end, with who did each."""
    from tickwork.api.schemas import JobDetailOut, JobOut

    logs.configure("ERROR")
    with load_app(app) as the_app:
        job = the_app.get_job(job_id)
        executions = the_app.list_executions(job_id)
        events = the_app.timeline(job_id)
    if as_json:
        detail = JobOut.model_validate(job).model_dump() | {"executions": executions}
        shown = JobDetailOut.model_validate(detail).model_dump(mode="json")
        print_json(
            shown | {"timeline": TypeAdapter(list[TimelineEntry]).dump_python(events, mode="json")}
        )
        return
    fields = {
        "state": job.state.value,
        "queue": job.queue,
        "task": job.task,
        "args": json.dumps(job.args),
        "attempts": f"{job.attempts} of {job.max_attempts}",
        "priority": str(job.priority),
        "run at (UTC)": utc_time(job.run_at),
        "timeout": "-" if job.timeout is None else f"{job.timeout:g}s",
        "created (UTC)": f"{utc_time(job.created_at)} by {job.created_by}",
        "finished (UTC)": utc_time(job.finished_at),
        "cancel requested (UTC)": utc_time(job.cancel_requested_at),
        "unique key": job.unique_key or "-",
        "schedule": "-"
        if job.schedule_id is None
        else f"{job.schedule_id}, fire time {utc_time(job.fire_time)}",
        "result": json.dumps(job.result),
        "error": _error(job.error),
        "progress": _progress(job.progress),
    }
    print_table(f"job {job.id}", ("field", "value"), fields.items())
    print_table(
        "attempts",
        ("#", "state", "worker", "started (UTC)", "lease until (UTC)", "took", "error"),
        (
            (
                str(e.attempt),
                e.state.value,
                str(e.worker_id),
                utc_time(e.started_at),
                utc_time(e.lease_expires_at),
                "-"
                if e.finished_at is None
                else f"{(e.finished_at - e.started_at).total_seconds():.3f}s",
                _error(e.error),
            )
            for e in executions
        ),
    )
    print_table(
        "timeline",
        ("at (UTC)", "event", "actor", "#", "detail"),
        (
            (
                utc_time(e.at),
                e.event,
                e.actor,
                "-" if e.attempt is None else str(e.attempt),
                ", ".join(f"{k}: {v}" for k, v in e.detail.items()) or "-",
            )
            for e in events
        ),
    )
    if job.error and job.error.traceback:
        typer.echo(job.error.traceback.rstrip())
    output = job.progress.output if job.progress and job.state is JobState.RUNNING else None
    for stream, text in (output or {}).items():
        if text:
            typer.echo(f"{stream} so far (the last 4 kB):\n{text.rstrip()}")


def _json_object(option: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{option} ({text!r}) is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{option} ({text!r}) must be a JSON object of argument names to values")
    return value


def _instant(option: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{option} ({text!r}) must be an ISO 8601 time, e.g. 2030-01-31T09:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise ConfigError(f"{option} ({text!r}) needs a time zone, e.g. Z or +01:00 at its end")
    return when


@jobs_cli.command("enqueue")
def jobs_enqueue(
    task: Annotated[
        str,
        typer.Argument(
            metavar="TASK",
            help="The task's name: one --app or a worker seen in the last day defines.",
        ),
    ],
    args: Annotated[str, typer.Option("--args", help="Keyword arguments as a JSON object.")] = "{}",
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue",
            "-q",
            help="Queue (default: the task's, as --app or its workers define it; else 'default').",
        ),
    ] = None,
    priority: Annotated[
        int | None, typer.Option("--priority", "-p", help="-100 to 100, higher runs first.")
    ] = None,
    run_at: Annotated[
        str | None,
        typer.Option("--run-at", help="Earliest start, ISO 8601 with a time zone."),
    ] = None,
    unique_key: Annotated[
        str | None,
        typer.Option(
            "--unique-key", help="No new job while a job with this key is pending or running."
        ),
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option("--max-attempts", help="Attempts before dead-lettering.")
    ] = None,
    any_task: Annotated[
        bool,
        typer.Option(
            "--any-task",
            help="Enqueue it even if no app or worker defines the task yet (it waits for one).",
        ),
    ] = False,
    as_json: JsonOption = False,
    app: AppOption = None,
) -> None:
    """Enqueue a job of a task by name and print its id (not a definition's run: tickwork
    definitions run NAME)."""
    from tickwork.api.schemas import JobOut
    from tickwork.definitions.records import refuse_runtime_task

    refuse_runtime_task(task)
    spec = JobSpec(
        task,
        _json_object("--args", args),
        queue,
        priority,
        max_attempts,
        _instant("--run-at", run_at),
        None,
        unique_key,
    )
    actor = cli_actor()

    async def enqueue(the_app: App, pool: AsyncConnectionPool[Any]) -> Job:
        async with pool.connection() as conn, conn.transaction():
            # a task this command's app lacks takes what its workers recorded it gives jobs
            known = await admin.known_tasks(conn, the_app.db.store)
            if not any_task and task not in the_app.tasks and task not in known:
                raise UnknownTaskError(
                    task,
                    [*the_app.tasks, *known],
                    hint="neither --app nor a worker seen in the last day defines it (--any-task"
                    " enqueues it anyway, to wait for a worker that does)",
                )
            job = (
                await the_app.enqueue_many_async(
                    [spec], conn=conn, created_by=actor, any_task=True, defaults=known
                )
            )[0]
            if not job.duplicate:  # as the API records it
                await audit_append(
                    conn, the_app.db.store, actor, "job.enqueued", "job", str(job.id), {}
                )
        return job

    job = run_with_pool(app, enqueue)
    if as_json:
        print_json(JobOut.model_validate(summarised(job)).model_dump(mode="json"))
    elif job.duplicate:
        typer.echo(f"job {job.id} already holds unique key {job.unique_key} ({job.state.value})")
    else:
        typer.echo(f"enqueued job {job.id}: {job.task} on queue {job.queue}")


@jobs_cli.command("retry")
def jobs_retry(job_id: JobId, app: AppOption = None) -> None:
    """Send a DEAD_LETTER or FAILED job back to PENDING now (its history is kept)."""
    logs.configure("ERROR")
    with load_app(app) as the_app:
        job = the_app.retry(job_id, actor=cli_actor())
    typer.echo(f"job {job.id} is {job.state.value}")


@jobs_cli.command("cancel")
def jobs_cancel(job_id: JobId, app: AppOption = None) -> None:
    """Cancel a PENDING or FAILED job now; a RUNNING one when its attempt completes."""
    logs.configure("ERROR")
    with load_app(app) as the_app:
        job = the_app.cancel(job_id, actor=cli_actor())
    if job.cancel_requested_at is not None and not job.state.is_final:
        typer.echo(f"job {job.id} is {job.state.value}; it is cancelled when its attempt ends")
    else:
        typer.echo(f"job {job.id} is {job.state.value}")


@jobs_cli.command("delete")
def jobs_delete(
    job_id: JobId,
    yes: YesOption = False,
    app: AppOption = None,
) -> None:
    """Delete a job that is not RUNNING, with its attempts (cancel a running one first). Asks
    to confirm unless --yes; the audit trail keeps who deleted it (job.deleted)."""
    logs.configure("ERROR")
    admin.check_job_id(job_id)
    with load_app(app) as the_app:
        if not yes:
            job = the_app.get_job(job_id)
            typer.confirm(
                f"Delete job {job.id} ({job.state.value}, task {job.task}, queue {job.queue})"
                f" and its {job.attempts} attempt{'' if job.attempts == 1 else 's'}?",
                abort=True,
            )
        deleted = the_app.delete_job(job_id, actor=cli_actor())
    typer.echo(f"deleted job {deleted.id} (it was {deleted.state.value})")
