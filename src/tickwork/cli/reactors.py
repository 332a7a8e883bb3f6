"""``tickwork reactors``: the registered reactors and their switches.

A reactor's runtime switches are not stored with the signals: an override lives in the memory
of the ``tickwork serve`` process that runs the signal processor, and is lost when it
restarts. So ``reactors list`` shows the configuration unless given the ``--url`` and
``--token`` of that process, and ``reactors enable``/``disable`` always go through its HTTP
API. ``--json`` prints the API's response models (:mod:`tickwork.api.signals`), or without
``--url`` the configured part of them (:class:`ConfiguredReactorOut`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from tickwork.app import App
from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    print_json,
    print_table,
    run_with_pool,
    utc_time,
)
from tickwork.services.leases import Role
from tickwork.signals import admin
from tickwork.signals.control import RuntimeControl

if TYPE_CHECKING:
    import httpx

    from tickwork.api.signals import ReactorOut

__all__ = ["reactors_cli"]

API_URL_ENV = "TICKWORK_API_URL"
API_TOKEN_ENV = "TICKWORK_API_TOKEN"
HTTP_TIMEOUT = 30.0
"""Seconds to wait for the serving process to answer."""
REACTORS_PATH = "/api/admin/signals/reactors"

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

reactors_cli = typer.Typer(
    help="Registered reactors and their switches; runtime enable/disable of a running serve.",
    no_args_is_help=True,
    cls=Group,
)


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2, as ``main`` reports a :class:`TickworkError`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


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


async def holder_control(the_app: App, pool: AsyncConnectionPool[Any]) -> admin.HeldControl:
    """The SIGNAL_MASTER holder's reactors and configuration, as it published them (this
    app's own when nobody holds the lease)."""
    local = RuntimeControl(the_app.settings.signals)
    return await admin.held_control(
        pool, the_app.db.store, Role.SIGNAL_MASTER, local, the_app.reactors
    )


async def _reactor_views(the_app: App, pool: AsyncConnectionPool[Any]) -> list[admin.ReactorView]:
    held = await holder_control(the_app, pool)
    return await admin.reactors_view(pool, the_app.db.store, held)


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
    return f"{run['outcome']}{' (dry run)' if run['dry_run'] else ''} at {utc_time(when)}"


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
    views = [_configured(v) for v in run_with_pool(app, _reactor_views)]
    if as_json:
        print_json([v.model_dump(mode="json") for v in views])
        return
    print_table(
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
    print_table(
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
