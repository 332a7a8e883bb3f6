"""``tickwork users``, ``tickwork jobs`` and ``tickwork queues``: operator actions straight on
the database, without the HTTP API.

The commands call the library functions the API calls (:mod:`tickwork.queue.admin`,
:class:`~tickwork.auth.AuthService`, the :class:`~tickwork.app.App` job actions), so the same
rules and audit events apply; the audit trail names the actor ``cli:<login name>``. ``--json``
prints the API's response models (:mod:`tickwork.api.schemas`), so both answer in one shape.
Importing this module registers the commands on :data:`tickwork.cli.process.cli`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import psycopg
import typer
from psycopg_pool import AsyncConnectionPool

from tickwork import logs
from tickwork.app import App
from tickwork.audit import audit_append
from tickwork.auth import AuthService, User
from tickwork.auth.service import GENERATED_PASSWORD_BYTES
from tickwork.cli.process import (
    AppOption,
    Group,
    JsonOption,
    cli,
    cli_actor,
    console,
    load_app,
    print_json,
)
from tickwork.db.database import database_error
from tickwork.errors import ConfigError, NotFoundError
from tickwork.queue import admin
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.rows import summarised
from tickwork.types import ErrorInfo, Job, Progress

T = TypeVar("T")

JobId = Annotated[int, typer.Argument(metavar="ID", help="The job's id.")]
UserKey = Annotated[str, typer.Argument(metavar="EMAIL_OR_ID", help="The user's email or id.")]

users_cli = typer.Typer(
    help="Create users, list them, change their role or password, disable them.",
    no_args_is_help=True,
    cls=Group,
)
jobs_cli = typer.Typer(
    help="List jobs, show one with its attempts, enqueue, retry or cancel one.",
    no_args_is_help=True,
    cls=Group,
)
queues_cli = typer.Typer(
    help="Queue statistics; pause and resume queues.", no_args_is_help=True, cls=Group
)
cli.add_typer(users_cli, name="users")
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(queues_cli, name="queues")


# -- plumbing -------------------------------------------------------------------------------


def _run(app: str | None, work: Callable[[App, AsyncConnectionPool[Any]], Awaitable[T]]) -> T:
    """Run ``work`` with the app's async pool on a fresh event loop and close the pool after.
    Driver errors become a :class:`DatabaseError` (one line and exit code 2 in ``main``)."""
    logs.configure("ERROR")
    the_app = load_app(app)

    async def session() -> T:
        try:
            return await work(the_app, await the_app.db.async_pool())
        except psycopg.Error as exc:  # PoolTimeout included: the database is unreachable
            raise database_error(exc) from exc
        finally:
            await the_app.db.aclose()

    return asyncio.run(session())


def _run_auth(app: str | None, work: Callable[[AuthService], Awaitable[T]]) -> T:
    """:func:`_run` with a started :class:`AuthService`."""

    async def with_auth(the_app: App, pool: AsyncConnectionPool[Any]) -> T:
        auth = AuthService(pool, the_app.db.statements, the_app.settings.auth)
        await auth.start()
        return await work(auth)

    return _run(app, with_auth)


def _print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        # Values (ids, emails) wrap rather than being cut short; header words stay whole.
        table.add_column(column, overflow="fold", min_width=max(map(len, column.split())))
    for row in rows:
        table.add_row(*row)
    console().print(table)  # piped: a line per row, not wrapped at 80 columns


def _time(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _error(error: ErrorInfo | None) -> str:
    return f"{error.type}: {error.message}" if error else "-"


# -- users ----------------------------------------------------------------------------------


async def _find_user(auth: AuthService, email_or_id: str) -> User:
    """A user by id (all digits) or by email in any case."""
    if email_or_id.isdigit():
        return await auth.get_user(int(email_or_id))
    wanted = email_or_id.strip().lower()
    for user in await auth.list_users():
        if user.email.lower() == wanted:
            return user
    raise NotFoundError("user", email_or_id)


@users_cli.command("create")
def users_create(
    email: str,
    role: Annotated[str, typer.Option("--role", "-r", help="VIEWER, OPERATOR or ADMIN.")],
    name: Annotated[str, typer.Option("--name", help="Display name.")] = "",
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin", help="Read the password from standard input (else one is made)."
        ),
    ] = False,
    app: AppOption = None,
) -> None:
    """Create a user. Without --password-stdin a random password is printed, once."""
    generated = None
    if password_stdin:
        password = sys.stdin.read().rstrip(
            "\r\n"
        )  # the line end is the shell's, not the password's
    else:
        generated = password = secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
    actor = cli_actor()
    user = _run_auth(
        app, lambda auth: auth.create_user(email, password, role, name=name, actor=actor)
    )
    typer.echo(f"created user {user.id}: {user.email} ({user.role.name})")
    if generated is not None:
        typer.echo(f"password (shown once; store it now): {generated}")


@users_cli.command("list")
def users_list(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Every user, oldest first."""
    from tickwork.api.schemas import UserOut

    users = _run_auth(app, lambda auth: auth.list_users())
    if as_json:
        print_json([UserOut.model_validate(u).model_dump(mode="json") for u in users])
        return
    _print_table(
        "users",
        ("id", "email", "name", "role", "state", "created (UTC)", "last login (UTC)"),
        (
            (
                str(u.id),
                u.email,
                u.name or "-",
                u.role.name,
                "disabled" if u.disabled else "enabled",
                _time(u.created_at),
                _time(u.last_login_at),
            )
            for u in users
        ),
    )


@users_cli.command("set-role")
def users_set_role(
    email_or_id: UserKey,
    role: Annotated[str, typer.Argument(metavar="ROLE", help="VIEWER, OPERATOR or ADMIN.")],
    app: AppOption = None,
) -> None:
    """Change a user's role; their sessions end, so they log in again."""
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.set_role(user.id, role, actor)

    user = _run_auth(app, change)
    typer.echo(f"user {user.id} ({user.email}) is now {user.role.name}")


@users_cli.command("set-password")
def users_set_password(email_or_id: UserKey, app: AppOption = None) -> None:
    """Set a user's password, read from standard input: typed without echo at a terminal,
    else its first line. The same policy as a change through the API; their sessions end."""
    if sys.stdin.isatty():
        password: str = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")  # the line end is the shell's
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.set_password(user.id, password, actor)

    user = _run_auth(app, change)
    typer.echo(f"password of user {user.id} ({user.email}) set; their sessions have ended")


@users_cli.command("disable")
def users_disable(
    email_or_id: UserKey,
    enable: Annotated[
        bool, typer.Option("--enable", help="Enable the user again instead.")
    ] = False,
    app: AppOption = None,
) -> None:
    """Disable a user: no login, their sessions end and their API tokens stop working."""
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.disable(user.id, actor, disabled=not enable)

    user = _run_auth(app, change)
    typer.echo(f"user {user.id} ({user.email}) is {'disabled' if user.disabled else 'enabled'}")


# -- jobs -----------------------------------------------------------------------------------


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
    as_json: JsonOption = False,
    app: AppOption = None,
) -> None:
    """Jobs, newest first, a page at a time."""
    from tickwork.api.schemas import JobPage

    where = admin.JobFilter.parse(state=state, queue=queue, task=task, schedule=schedule)
    page = _run(
        app,
        lambda the_app, pool: admin.list_jobs(
            pool, the_app.db.statements, where, limit=limit, before_id=before_id
        ),
    )
    if as_json:
        print_json(JobPage.model_validate(page).model_dump(mode="json"))
        return
    _print_table(
        "jobs",
        ("id", "state", "queue", "task", "attempts", "created (UTC)", "finished (UTC)"),
        (
            (
                str(j.id),
                j.state.value,
                j.queue,
                j.task,
                f"{j.attempts}/{j.max_attempts}",
                _time(j.created_at),
                _time(j.finished_at),
            )
            for j in page.items
        ),
    )
    if page.next_cursor is not None:
        typer.echo(f"more: --before-id {page.next_cursor}")


def _progress(progress: Progress | None) -> str:
    if progress is None:
        return "-"
    done = (
        f"{progress.current:g}"
        if progress.total is None
        else (f"{progress.current:g} of {progress.total:g} ({progress.fraction:.0%})")
    )
    note = f": {progress.message}" if progress.message else ""
    return f"{done}{note} (attempt {progress.attempt}, {_time(progress.at)})"


@jobs_cli.command("show")
def jobs_show(job_id: JobId, as_json: JsonOption = False, app: AppOption = None) -> None:
    """One job with every attempt: worker, lease, timings, error."""
    from tickwork.api.schemas import JobDetailOut, JobOut

    logs.configure("ERROR")
    with load_app(app) as the_app:
        job = the_app.get_job(job_id)
        executions = the_app.list_executions(job_id)
    if as_json:
        detail = JobOut.model_validate(job).model_dump() | {"executions": executions}
        print_json(JobDetailOut.model_validate(detail).model_dump(mode="json"))
        return
    fields = {
        "state": job.state.value,
        "queue": job.queue,
        "task": job.task,
        "args": json.dumps(job.args),
        "attempts": f"{job.attempts} of {job.max_attempts}",
        "priority": str(job.priority),
        "run at (UTC)": _time(job.run_at),
        "timeout": "-" if job.timeout is None else f"{job.timeout:g}s",
        "created (UTC)": f"{_time(job.created_at)} by {job.created_by}",
        "finished (UTC)": _time(job.finished_at),
        "cancel requested (UTC)": _time(job.cancel_requested_at),
        "unique key": job.unique_key or "-",
        "schedule": "-"
        if job.schedule_id is None
        else f"{job.schedule_id}, fire time {_time(job.fire_time)}",
        "result": json.dumps(job.result),
        "error": _error(job.error),
        "progress": _progress(job.progress),
    }
    _print_table(f"job {job.id}", ("field", "value"), fields.items())
    _print_table(
        "attempts",
        ("#", "state", "worker", "started (UTC)", "lease until (UTC)", "took", "error"),
        (
            (
                str(e.attempt),
                e.state.value,
                str(e.worker_id),
                _time(e.started_at),
                _time(e.lease_expires_at),
                "-"
                if e.finished_at is None
                else f"{(e.finished_at - e.started_at).total_seconds():.3f}s",
                _error(e.error),
            )
            for e in executions
        ),
    )
    if job.error and job.error.traceback:
        typer.echo(job.error.traceback.rstrip())


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
            help="The task's name; --app need not define it (a worker that does runs the job).",
        ),
    ],
    args: Annotated[str, typer.Option("--args", help="Keyword arguments as a JSON object.")] = "{}",
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue", "-q", help="Queue (default: the task's; 'default' if --app lacks it)."
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
    as_json: JsonOption = False,
    app: AppOption = None,
) -> None:
    """Enqueue a job of a task by name and print its id."""
    from tickwork.api.schemas import JobOut

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
            job = (
                await the_app.enqueue_many_async([spec], conn=conn, created_by=actor, any_task=True)
            )[0]
            if not job.duplicate:  # as the API records it
                await audit_append(
                    conn, the_app.db.statements, actor, "job.enqueued", "job", str(job.id), {}
                )
        return job

    job = _run(app, enqueue)
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


# -- queues ---------------------------------------------------------------------------------


@queues_cli.command("list")
def queues_list(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Every queue: jobs by state, the oldest waiting job's age, recent throughput, pause."""
    from tickwork.api.schemas import QueueOut

    stats = _run(app, lambda the_app, pool: admin.queue_stats(pool, the_app.db.statements))
    if as_json:
        print_json([QueueOut.model_validate(q).model_dump(mode="json") for q in stats])
        return
    _print_table(
        "queues",
        (
            "queue",
            "state",
            "pending",
            "running",
            "failed",
            "succeeded",
            "cancelled",
            "dead letter",
            "oldest pending",
            "done in 5 min",
        ),
        (
            (
                q.name,
                "paused" if q.paused else "active",
                f"{q.pending:,}",
                f"{q.running:,}",
                f"{q.failed:,}",
                f"{q.succeeded:,}",
                f"{q.cancelled:,}",
                f"{q.dead_letter:,}",
                "-" if q.oldest_pending_seconds is None else f"{q.oldest_pending_seconds:.0f}s",
                f"{q.finished_last_5_minutes:,}",
            )
            for q in stats
        ),
    )
    for q in stats:
        for u in q.unserved:
            typer.echo(
                f"{u.jobs:,} jobs of task {u.task} wait in queue {q.name}: no live worker knows it"
            )


def _set_paused(app: str | None, name: str, paused: bool) -> None:
    actor = cli_actor()
    _run(
        app,
        lambda the_app, pool: admin.set_queue_paused(
            pool, the_app.db.statements, name, paused, actor
        ),
    )


@queues_cli.command("pause")
def queues_pause(name: str, app: AppOption = None) -> None:
    """Stop workers claiming from a queue (running jobs finish); it survives restarts."""
    _set_paused(app, name, True)
    typer.echo(f"paused queue {name}")


@queues_cli.command("resume")
def queues_resume(name: str, app: AppOption = None) -> None:
    """Let workers claim from a paused queue again."""
    _set_paused(app, name, False)
    typer.echo(f"resumed queue {name}")
