"""``tickwork signals`` and ``tickwork reactors``: the signals admin from the command line.

Signals are stored, so the ``signals`` commands act straight on the database through
:mod:`tickwork.signals.admin`, the functions the admin API calls: the same rules apply and the
audit trail names the actor ``cli:<login name>``. ``--json`` prints the API's response models
(:mod:`tickwork.api.signals`), so both answer in one shape.

A reactor's runtime switches are different: an override lives in the memory of the
``tickwork serve`` process that runs the signal processor, and is lost when it restarts. So
``reactors list`` shows the configuration unless given the ``--url`` and ``--token`` of that
process, and ``reactors enable``/``disable`` always go through its HTTP API.
Importing this module registers the commands on :data:`tickwork.cli.process.cli`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from tickwork.app import App
from tickwork.cli.jobs import _print_table, _run, _time
from tickwork.cli.process import AppOption, Group, JsonOption, cli, cli_actor, print_json
from tickwork.queue.admin import DEFAULT_PAGE, MAX_PAGE, Page
from tickwork.signals import admin
from tickwork.signals.types import Signal

if TYPE_CHECKING:
    import httpx

    from tickwork.api.signals import ReactorOut

__all__ = ["reactors_cli", "signals_cli"]

API_URL_ENV = "TICKWORK_API_URL"
API_TOKEN_ENV = "TICKWORK_API_TOKEN"
HTTP_TIMEOUT = 30.0
"""Seconds to wait for the serving process to answer."""
REACTORS_PATH = "/api/admin/signals/reactors"

SignalId = Annotated[int, typer.Argument(metavar="ID", help="The signal's id.")]
ReactorName = Annotated[str, typer.Argument(metavar="NAME", help="The reactor's name.")]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=API_URL_ENV,
        help="Base URL of the running `tickwork serve` whose runtime switches to use.",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=API_TOKEN_ENV,
        help="An ADMIN's bearer token (an access token or an API token) for --url.",
    ),
]

signals_cli = typer.Typer(
    help="List signals, show one with its deliveries, stats; retry or cancel one.",
    no_args_is_help=True,
    cls=Group,
)
reactors_cli = typer.Typer(
    help="Registered reactors and their switches; runtime enable/disable of a running serve.",
    no_args_is_help=True,
    cls=Group,
)
cli.add_typer(signals_cli, name="signals")
cli.add_typer(reactors_cli, name="reactors")


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2, as ``main`` reports a :class:`TickworkError`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


# -- signals --------------------------------------------------------------------------------


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
        statements = the_app.db.statements
        if signal_type is not None:
            await admin.check_signal_type(pool, statements, the_app.reactors, signal_type)
        where = admin.SignalFilter.parse(
            status=status,
            signal_type=signal_type,
            aggregate_key=key,
            organisation_id=organisation,
        )
        return await admin.list_signals(pool, statements, where, limit=limit, before_id=before_id)

    found = _run(app, page)
    if as_json:
        print_json(SignalPage.model_validate(found).model_dump(mode="json"))
        return
    signals: list[Signal] = found.items
    _print_table(
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
                _time(s.created_at),
                _time(s.process_after),
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

    detail = _run(
        app, lambda the_app, pool: admin.get_signal(pool, the_app.db.statements, signal_id)
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
        "created (UTC)": _time(s.created_at),
        "last squash (UTC)": _time(s.updated_at),
        "process after (UTC)": _time(s.process_after),
        "claimed (UTC)": _time(s.claimed_at),
        "processed (UTC)": _time(s.processed_at),
        "retries": f"{s.retry_count} of {s.max_retries}",
        "next retry (UTC)": _time(s.next_retry_at),
        "error": s.error_message or "-",
    }
    _print_table(f"signal {s.id}", ("field", "value"), fields.items())
    _print_table(
        "deliveries",
        ("reactor", "status", "dry run", "processed (UTC)", "retries", "next retry (UTC)", "error"),
        (
            (
                d.reactor_name,
                d.status.value,
                "yes" if d.dry_run else "no",
                _time(d.processed_at),
                str(d.retry_count),
                _time(d.next_retry_at),
                d.error_message or "-",
            )
            for d in detail.deliveries
        ),
    )


@signals_cli.command("stats")
def signals_stats(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Counts by status and type, with the oldest signal of each."""
    from tickwork.api.signals import StatsOut

    rows = _run(app, lambda the_app, pool: admin.stats(pool, the_app.db.statements))
    if as_json:
        print_json([StatsOut.model_validate(r).model_dump(mode="json") for r in rows])
        return
    _print_table(
        "signals by status and type",
        ("status", "type", "count", "oldest created (UTC)"),
        ((r.status.value, r.signal_type, f"{r.count:,}", _time(r.oldest_created_at)) for r in rows),
    )


@signals_cli.command("retry")
def signals_retry(signal_id: SignalId, app: AppOption = None) -> None:
    """Send a DEAD signal back to PENDING (reactors that completed it do not run again).

    Refused when a fresher PENDING signal holds the same type and key: its work is queued.
    """
    actor = cli_actor()
    signal = _run(
        app, lambda the_app, pool: admin.retry(pool, the_app.db.statements, signal_id, actor)
    )
    typer.echo(f"signal {signal.id} is {signal.status.value}")


@signals_cli.command("cancel")
def signals_cancel(signal_id: SignalId, app: AppOption = None) -> None:
    """Mark a PENDING signal COMPLETED without processing it."""
    actor = cli_actor()
    signal = _run(
        app, lambda the_app, pool: admin.cancel(pool, the_app.db.statements, signal_id, actor)
    )
    typer.echo(f"signal {signal.id} is {signal.status.value} (cancelled, not processed)")


# -- reactors -------------------------------------------------------------------------------


class ConfiguredBool(BaseModel):
    """A switch's configured value: without ``--url`` the runtime override of a serving
    process is out of sight (the API's shape adds ``override`` and ``effective``)."""

    config: bool


class ConfiguredSet(BaseModel):
    """An organisation set's configured value (empty: none)."""

    config: list[str]


class ConfiguredReactorOut(BaseModel):
    """A registered reactor as configured (``reactors list --json`` without ``--url``)."""

    name: str
    handles: list[str]
    sweep_cron: str | None
    """The effective cron: the configuration's ``sweep_cron``, else the reactor's own."""
    organisation_scoped: bool
    enabled: ConfiguredBool
    dry_run: ConfiguredBool
    organisations: ConfiguredSet
    last_sweep: dict[str, Any] | None


def _configured(view: admin.ReactorView) -> ConfiguredReactorOut:
    return ConfiguredReactorOut(
        name=view.name,
        handles=view.handles,
        sweep_cron=view.sweep_cron,
        organisation_scoped=view.organisation_scoped,
        enabled=ConfiguredBool(config=view.enabled.config),
        dry_run=ConfiguredBool(config=view.dry_run.config),
        organisations=ConfiguredSet(config=sorted(view.organisations.config)),
        last_sweep=view.last_sweep,
    )


async def _reactor_views(the_app: App, pool: AsyncConnectionPool[Any]) -> list[admin.ReactorView]:
    from tickwork.signals.runtime import SignalRuntime

    # Never run: its control holds no override, so the switches it reports are the
    # configuration's, and its sweep scheduler resolves each effective sweep cron.
    runtime = SignalRuntime(the_app, pool)
    return await admin.reactors_view(
        pool, the_app.db.statements, the_app.reactors, runtime.control, runtime.sweeps
    )


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _orgs(values: list[str]) -> str:
    return ", ".join(values) if values else "none"


def _tier(config: str, override: str | None, effective: str) -> str:
    return effective if override is None else f"{effective} (override; config: {config})"


def _last_sweep(run: dict[str, Any] | None) -> str:
    if run is None:
        return "never"
    started = run["started_at"]
    when = datetime.fromisoformat(started) if isinstance(started, str) else started
    return f"{run['outcome']}{' (dry run)' if run['dry_run'] else ''} at {_time(when)}"


def _cron(reactor: ConfiguredReactorOut | ReactorOut) -> str:
    return reactor.sweep_cron or "-"


@reactors_cli.command("list")
def reactors_list(
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    app: AppOption = None,
) -> None:
    """Every registered reactor: handled types, sweep cron, switches, last sweep.

    Without --url: the configured switches of the --app's reactors.
    With --url: the configured, override and effective switches of that serving process.
    """
    if url is not None:
        _remote_reactors(url, token, as_json)
        return
    views = [_configured(v) for v in _run(app, _reactor_views)]
    if as_json:
        print_json([v.model_dump(mode="json") for v in views])
        return
    _print_table(
        "reactors (configuration; a running serve's overrides: --url)",
        ("name", "handles", "sweep cron", "enabled", "dry run", "organisations", "last sweep"),
        (
            (
                v.name,
                ", ".join(v.handles) or "-",
                _cron(v),
                _yes(v.enabled.config),
                _yes(v.dry_run.config),
                _orgs(v.organisations.config) if v.organisation_scoped else "- (not scoped)",
                _last_sweep(v.last_sweep),
            )
            for v in views
        ),
    )


def _remote_reactors(url: str, token: str | None, as_json: bool) -> None:
    from tickwork.api.signals import ReactorOut

    answer = _request("GET", url, token, REACTORS_PATH)
    reactors = [ReactorOut.model_validate(r) for r in answer.json()]
    if as_json:
        print_json([r.model_dump(mode="json") for r in reactors])
        return
    _print_table(
        f"reactors of {url}",
        ("name", "handles", "sweep cron", "enabled", "dry run", "organisations", "last sweep"),
        (
            (
                r.name,
                ", ".join(r.handles) or "-",
                _cron(r),
                _tier(
                    _yes(r.enabled.config),
                    None if r.enabled.override is None else _yes(r.enabled.override),
                    _yes(r.enabled.effective),
                ),
                _tier(
                    _yes(r.dry_run.config),
                    None if r.dry_run.override is None else _yes(r.dry_run.override),
                    _yes(r.dry_run.effective),
                ),
                _tier(
                    _orgs(r.organisations.config),
                    None if r.organisations.override is None else _orgs(r.organisations.override),
                    _orgs(r.organisations.effective),
                )
                if r.organisation_scoped
                else "- (not scoped)",
                _last_sweep(r.last_sweep),
            )
            for r in reactors
        ),
    )


def _request(
    method: str, url: str, token: str | None, path: str, body: object = None
) -> httpx.Response:
    """Call the serving process's admin API; a failure is one line and exit code 2 (the
    token is sent, never printed)."""
    import httpx

    if not token:
        _fail(f"--url needs --token (or {API_TOKEN_ENV}): an ADMIN's bearer token")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=HTTP_TIMEOUT
        ) as client:
            answer = client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        _fail(f"cannot reach {url}: {exc}")
    if answer.is_error:
        _fail(_problem(answer))
    return answer


def _problem(answer: httpx.Response) -> str:
    """The ``detail`` of a problem response, else the status."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str) and detail:
        return detail
    return f"{answer.request.url} answered HTTP {answer.status_code} {answer.reason_phrase}"


def _switch(
    command: str, name: str, enabled: bool | None, url: str | None, token: str | None
) -> None:
    if url is None:
        _fail(
            f"reactors {command} changes a runtime override, which lives in the memory of the "
            f"running `tickwork serve` process: pass its --url and --token "
            f"(or set {API_URL_ENV} and {API_TOKEN_ENV})"
        )
    _request("PUT", url, token, f"{REACTORS_PATH}/{name}/enabled", {"enabled": enabled})
    if enabled is None:
        typer.echo(f"reactor {name}: runtime override dropped at {url} (back to its configuration)")
    else:
        state = "enabled" if enabled else "disabled"
        typer.echo(f"reactor {name} is {state} at {url} (a runtime override, lost on restart)")


ClearOption = Annotated[
    bool, typer.Option("--clear", help="Drop the runtime override (back to the configuration).")
]


@reactors_cli.command("enable")
def reactors_enable(
    name: ReactorName,
    clear: ClearOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Enable a reactor in a running `tickwork serve` (needs --url/--token; per process)."""
    _switch("enable", name, None if clear else True, url, token)


@reactors_cli.command("disable")
def reactors_disable(
    name: ReactorName,
    clear: ClearOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Disable a reactor in a running `tickwork serve` (needs --url/--token; per process)."""
    _switch("disable", name, None if clear else False, url, token)
