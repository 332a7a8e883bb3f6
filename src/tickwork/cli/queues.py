"""``tickwork queues``: queue statistics; pause and resume queues, straight on the database
without the HTTP API.

The commands call :mod:`tickwork.queue.admin`, as the API does, so the same rules and audit
events apply; the audit trail names the actor ``cli:<login name>``. ``list --json`` prints
the API's answer (:class:`tickwork.queue.admin.QueueStats`).
"""

from __future__ import annotations

import typer

from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    cli_actor,
    print_json,
    print_table,
    run_with_pool,
)
from tickwork.queue import admin

__all__ = ["queues_cli"]

queues_cli = typer.Typer(
    help="Queue statistics; pause and resume queues.", no_args_is_help=True, cls=Group
)


@queues_cli.command("list")
def queues_list(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Every queue: jobs by state, the oldest waiting job's age, recent throughput, pause."""
    from pydantic import TypeAdapter

    stats = run_with_pool(app, lambda the_app, pool: admin.queue_stats(pool, the_app.db.store))
    if as_json:
        print_json(TypeAdapter(list[admin.QueueStats]).dump_python(stats, mode="json"))
        return
    print_table(
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
            typer.echo(u.describe(q.name))


def _set_paused(app: str | None, name: str, paused: bool) -> None:
    actor = cli_actor()
    run_with_pool(
        app,
        lambda the_app, pool: admin.set_queue_paused(pool, the_app.db.store, name, paused, actor),
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
