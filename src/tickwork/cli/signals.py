"""``tickwork signals``: list signals, show one with its deliveries, stats; retry or cancel
one.

Signals are stored, so these commands act straight on the database through
:mod:`tickwork.signals.admin`, the functions the admin API calls: the same rules apply and the
audit trail names the actor ``cli:<login name>``. ``--json`` prints the API's response models
(:mod:`tickwork.api.signals`), so both answer in one shape.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from psycopg_pool import AsyncConnectionPool

from tickwork.app import App
from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    cli_actor,
    print_json,
    print_table,
    run_with_pool,
    utc_time,
)
from tickwork.cli.reactors import holder_control
from tickwork.queue.admin import DEFAULT_PAGE, MAX_PAGE, Page
from tickwork.signals import admin
from tickwork.signals.records import Signal

__all__ = ["signals_cli"]

SignalId = Annotated[int, typer.Argument(metavar="ID", help="The signal's id.")]

signals_cli = typer.Typer(
    help="List signals, show one with its deliveries, stats; retry or cancel one.",
    no_args_is_help=True,
    cls=Group,
)


def _entity(s: Signal) -> str:
    return " ".join(p for p in (s.entity_type, s.entity_id) if p) or "-"


@signals_cli.command("list")
def signals_list(
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            "-s",
            help="PENDING, PROCESSING, COMPLETED, DEAD (repeat or comma-separate).",
        ),
    ] = None,
    signal_type: Annotated[
        str | None, typer.Option("--type", "-t", help="Exactly this signal type.")
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Exactly this aggregate key.")
    ] = None,
    organisation: Annotated[
        str | None, typer.Option("--organisation", "-o", help="Exactly this organisation id.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help=f"Signals per page (1 to {MAX_PAGE}).")
    ] = DEFAULT_PAGE,
    before_id: Annotated[
        int | None, typer.Option("--before-id", help="Only signals older than this id (next page).")
    ] = None,
    as_json: JsonOption = False,
    app: AppOption = None,
) -> None:
    """Signals, newest first, a page at a time; unknown statuses and types are refused."""
    from tickwork.api.signals import SignalPage

    async def page(the_app: App, pool: AsyncConnectionPool[Any]) -> Page:
        store = the_app.db.store
        if signal_type is not None:
            await admin.check_signal_type(pool, store, the_app.reactors, signal_type)
        where = admin.SignalFilter.parse(
            status=status,
            signal_type=signal_type,
            aggregate_key=key,
            organisation_id=organisation,
        )
        return await admin.list_signals(pool, store, where, limit=limit, before_id=before_id)

    found = run_with_pool(app, page)
    if as_json:
        print_json(SignalPage.model_validate(found).model_dump(mode="json"))
        return
    signals: list[Signal] = found.items
    print_table(
        "signals",
        (
            "id",
            "status",
            "type",
            "entity",
            "key",
            "organisation",
            "created (UTC)",
            "process after (UTC)",
            "retries",
            "error",
        ),
        (
            (
                str(s.id),
                s.status.value,
                s.signal_type,
                _entity(s),
                s.aggregate_key or "-",
                s.organisation_id or "-",
                utc_time(s.created_at),
                utc_time(s.process_after),
                f"{s.retry_count}/{s.max_retries}",
                s.error_message or "-",
            )
            for s in signals
        ),
    )
    if found.next_cursor is not None:
        typer.echo(f"more: --before-id {found.next_cursor}")


@signals_cli.command("show")
def signals_show(signal_id: SignalId, as_json: JsonOption = False, app: AppOption = None) -> None:
    """One signal with each reactor's delivery (which reactor failed, and why)."""
    from tickwork.api.signals import SignalDetailOut

    detail = run_with_pool(
        app, lambda the_app, pool: admin.get_signal(pool, the_app.db.store, signal_id)
    )
    if as_json:
        print_json(SignalDetailOut.model_validate(detail).model_dump(mode="json"))
        return
    s = detail.signal
    fields = {
        "status": s.status.value,
        "type": s.signal_type,
        "entity": _entity(s),
        "aggregate key": s.aggregate_key or "-",
        "organisation": s.organisation_id or "-",
        "payload": json.dumps(s.payload),
        "created (UTC)": utc_time(s.created_at),
        "last squash (UTC)": utc_time(s.updated_at),
        "process after (UTC)": utc_time(s.process_after),
        "claimed (UTC)": utc_time(s.claimed_at),
        "processed (UTC)": utc_time(s.processed_at),
        "retries": f"{s.retry_count} of {s.max_retries}",
        "next retry (UTC)": utc_time(s.next_retry_at),
        "error": s.error_message or "-",
    }
    print_table(f"signal {s.id}", ("field", "value"), fields.items())
    print_table(
        "deliveries",
        ("reactor", "status", "dry run", "processed (UTC)", "retries", "next retry (UTC)", "error"),
        (
            (
                d.reactor_name,
                d.status.value,
                "yes" if d.dry_run else "no",
                utc_time(d.processed_at),
                str(d.retry_count),
                utc_time(d.next_retry_at),
                d.error_message or "-",
            )
            for d in detail.deliveries
        ),
    )


@signals_cli.command("stats")
def signals_stats(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Counts by status and type, with the oldest signal of each."""
    from tickwork.api.signals import StatsOut

    rows = run_with_pool(app, lambda the_app, pool: admin.stats(pool, the_app.db.store))
    if as_json:
        print_json([StatsOut.model_validate(r).model_dump(mode="json") for r in rows])
        return
    print_table(
        "signals by status and type",
        ("status", "type", "count", "oldest created (UTC)"),
        (
            (r.status.value, r.signal_type, f"{r.count:,}", utc_time(r.oldest_created_at))
            for r in rows
        ),
    )


@signals_cli.command("retry")
def signals_retry(
    signal_id: SignalId,
    reactor: Annotated[
        str | None,
        typer.Option(
            "--reactor",
            help="Run this reactor's DEAD delivery again (the signal itself may be COMPLETED).",
        ),
    ] = None,
    app: AppOption = None,
) -> None:
    """Send a DEAD signal back to PENDING (reactors that completed it do not run again), or
    with --reactor one reactor's DEAD delivery.

    Refused when a fresher PENDING signal holds the same type and key: its work is queued.
    """
    actor = cli_actor()
    if reactor is None:
        signal = run_with_pool(
            app, lambda the_app, pool: admin.retry(pool, the_app.db.store, signal_id, actor)
        )
        typer.echo(f"signal {signal.id} is {signal.status.value}")
        return

    async def replay(the_app: App, pool: AsyncConnectionPool[Any]) -> Signal:
        held = await holder_control(the_app, pool)
        return await admin.retry_delivery(
            pool, the_app.db.store, signal_id, reactor, actor, held=held
        )

    signal = run_with_pool(app, replay)
    typer.echo(f"signal {signal.id} is {signal.status.value}; reactor {reactor} runs again")


@signals_cli.command("cancel")
def signals_cancel(signal_id: SignalId, app: AppOption = None) -> None:
    """Mark a PENDING signal COMPLETED without processing it."""
    actor = cli_actor()
    signal = run_with_pool(
        app, lambda the_app, pool: admin.cancel(pool, the_app.db.store, signal_id, actor)
    )
    typer.echo(f"signal {signal.id} is {signal.status.value} (cancelled, not processed)")
