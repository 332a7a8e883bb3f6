"""``tickwork schedules``: the stored schedules, listed and changed straight on the database.

Changes are audited with the actor ``cli:<login name>``; ``list --json`` prints the API's
response model (:class:`tickwork.api.schemas.ScheduleOut`).
"""

from __future__ import annotations

import typer

from tickwork import logs
from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    YesOption,
    cli_actor,
    console,
    load_app,
    print_json,
    run_with_pool,
)

__all__ = ["schedules_cli"]

schedules_cli = typer.Typer(
    help="List, pause, resume, trigger and delete stored schedules.", cls=Group
)


@schedules_cli.command("list")
def schedules_list(app: AppOption = None, as_json: JsonOption = False) -> None:
    """Every stored schedule with its next fire time."""
    from rich.table import Table

    from tickwork.api.schemas import ScheduleOut

    logs.configure("ERROR")
    stored = load_app(app).list_schedules()
    if as_json:
        print_json([ScheduleOut.model_validate(s).model_dump(mode="json") for s in stored])
        return
    table = Table(title="schedules")
    for column in ("name", "task", "cron", "timezone", "state", "next run (UTC)", "last fire"):
        table.add_column(column)
    for s in stored:
        state = "paused" if s.paused else ("enabled" if s.enabled else "disabled")
        last = s.last_fire_at.isoformat(timespec="seconds") if s.last_fire_at else "-"
        table.add_row(
            s.name,
            s.task,
            s.cron,
            s.timezone,
            state,
            s.next_run_at.isoformat(timespec="seconds"),
            last,
        )
    console().print(table)


def _schedule_change(app: str | None, name: str, change: str) -> None:
    logs.configure("ERROR")
    the_app = load_app(app)
    actor = cli_actor()
    actions = {
        "paused": lambda: the_app.pause_schedule(name, actor=actor),
        "resumed": lambda: the_app.pause_schedule(name, paused=False, actor=actor),
        "enabled": lambda: the_app.enable_schedule(name, actor=actor),
        "disabled": lambda: the_app.enable_schedule(name, enabled=False, actor=actor),
    }
    actions[change]()
    typer.echo(f"{change} {name}")


@schedules_cli.command("pause")
def schedules_pause(name: str, app: AppOption = None) -> None:
    """Pause a schedule (it stays paused across restarts)."""
    _schedule_change(app, name, "paused")


@schedules_cli.command("resume")
def schedules_resume(name: str, app: AppOption = None) -> None:
    """Resume a paused schedule."""
    _schedule_change(app, name, "resumed")


@schedules_cli.command("enable")
def schedules_enable(name: str, app: AppOption = None) -> None:
    """Enable a schedule; it goes on from its next fire time."""
    _schedule_change(app, name, "enabled")


@schedules_cli.command("disable")
def schedules_disable(name: str, app: AppOption = None) -> None:
    """Disable a schedule."""
    _schedule_change(app, name, "disabled")


@schedules_cli.command("trigger")
def schedules_trigger(name: str, app: AppOption = None) -> None:
    """Enqueue one job of the schedule now."""
    logs.configure("ERROR")
    job = load_app(app).trigger_schedule(name, actor=cli_actor())
    typer.echo(f"enqueued job {job.id} for {name}")


@schedules_cli.command("delete")
def schedules_delete(name: str, yes: YesOption = False, app: AppOption = None) -> None:
    """Delete a schedule stored by an operator, or one defined in code that no live worker
    defines any more (its code is gone); the jobs it made stay. Asks to confirm unless
    --yes."""
    from tickwork.schedule import admin

    actor = cli_actor()
    if not yes:
        found = run_with_pool(app, lambda the_app, pool: admin.get(pool, the_app.db.store, name))
        typer.confirm(
            f"Delete schedule {found.name} ({found.cron}, task {found.task})? The jobs it made"
            " stay.",
            abort=True,
        )
    run_with_pool(
        app, lambda the_app, pool: admin.delete(pool, the_app.db.store, name, actor=actor)
    )
    typer.echo(f"deleted {name}")
