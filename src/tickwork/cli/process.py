"""The ``tickwork`` command line.

Exit codes: 0 done; 1 ``doctor`` found something to warn about; 2 a usage error or an error
tickwork reports in one line (``error: ...`` on stderr); 4 ``serve`` cannot listen on the
API's address (:data:`tickwork.serve.EXIT_CANNOT_LISTEN`).
"""

from __future__ import annotations

import getpass
import importlib
import json
import os
import sys
from collections.abc import Callable
from importlib.metadata import version
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

from tickwork import logs
from tickwork.app import App
from tickwork.errors import ConfigError, TickworkError
from tickwork.serve import EXIT_CANNOT_LISTEN, ROLES, CannotListen

if TYPE_CHECKING:
    from rich.console import Console

_WORKLOADS = ("enqueue-single", "enqueue-batch", "drain", "latency", "steady")
_DEFAULT_WORKLOADS = ("enqueue-single", "enqueue-batch", "drain", "latency")


class Group(typer.core.TyperGroup):
    """typer's command group, with help that shows no value hint beside a flag: typer shows
    ``<bool>`` beside every flag, ``--help`` included, as if it took a value. Every group of
    the ``tickwork`` command line is one (``typer.Typer(cls=Group)``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_hints(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None and not isinstance(found, Group):
            _without_flag_hints(found.get_params(ctx))  # its --help option included
        return found


def _without_flag_hints(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, typer.core.TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # the help's type column shows this instead of <bool>
    return params


cli = typer.Typer(
    name="tickwork",
    cls=Group,
    help="PostgreSQL-native background work: jobs, workers and their control.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

AppOption = Annotated[
    str | None,
    typer.Option(
        "--app", "-a", help="Your App object as 'module:attribute' (e.g. myproj.jobs:app)."
    ),
]
LogLevel = Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (the API's shape) instead of a table.")
]

PIPED_WIDTH = 1_000
"""Columns output may take when it is not a terminal (a pipe, a file): rich would cut it at
80, and tables take only the columns they need."""


def console(*, stderr: bool = False) -> Console:
    """A rich console; one writing to a pipe or a file is not cut to 80 columns."""
    from rich.console import Console

    out = Console(stderr=stderr)
    return out if out.is_terminal else Console(stderr=stderr, width=PIPED_WIDTH)


def print_json(data: object) -> None:
    """``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, indent=2))


def load_app(path: str | None) -> App:
    """The App of ``--app module:attribute`` (every command loads it here); with no path, a
    bare App from the settings. The module is looked for in the current directory first, as
    ``python -m`` does. A bad path is a :class:`ConfigError` naming it (one line, exit 2)."""
    if path is None:
        return App()
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"--app ({path!r}) must look like 'module:attribute' (e.g. jobs:app)")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)  # the console script's path is its own bin/, not the cwd
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise ConfigError(
                f"--app ({path!r}): no module {exc.name!r} in the current directory ({here}) "
                "or on the Python path"
            ) from None
        raise ConfigError(f"--app ({path!r}): importing {module_name!r} failed: {exc}") from None
    except ImportError as exc:
        raise ConfigError(f"--app ({path!r}): importing {module_name!r} failed: {exc}") from None
    if not hasattr(module, attribute):
        raise ConfigError(f"--app ({path!r}): module {module_name!r} has no {attribute!r}")
    found = getattr(module, attribute)
    if not isinstance(found, App):
        raise ConfigError(
            f"--app ({path!r}): {attribute!r} is a {type(found).__name__}, not a tickwork App"
        )
    return found


def cli_actor() -> str:
    """How the audit trail names an operator acting through the command line."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in the environment nor the password database
        user = "unknown"
    return f"cli:{user}"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"tickwork {version('tickwork')}")
        raise typer.Exit()


@cli.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """PostgreSQL-native background work: jobs, workers and their control."""


@cli.command()
def migrate(app: AppOption = None, log_level: LogLevel = "INFO") -> None:
    """Apply pending schema migrations (safe to run from several processes at once)."""
    logs.configure(log_level)
    applied = load_app(app).migrate()
    typer.echo(f"applied migrations: {applied}" if applied else "schema is up to date")


@cli.command()
def worker(
    app: AppOption = None,
    queues: Annotated[
        str | None, typer.Option("--queues", "-q", help="Comma-separated queues to claim from.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", help="Most jobs running at once.")
    ] = None,
    log_level: LogLevel = "INFO",
) -> None:
    """Run a worker: claim and run jobs until SIGTERM or SIGINT."""
    logs.configure(log_level)
    the_app = load_app(app)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    the_app.run_worker(queues=names, concurrency=concurrency)


@cli.command()
def serve(
    app: AppOption = None,
    roles: Annotated[
        str | None,
        typer.Option(
            "--roles",
            help=f"Comma-separated: {', '.join(ROLES)} (default: all).",
        ),
    ] = None,
    queues: Annotated[
        str | None, typer.Option("--queues", "-q", help="Comma-separated queues to claim from.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", help="Most jobs running at once.")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address the API listens on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port the API listens on.")] = None,
    log_level: LogLevel = "INFO",
) -> None:
    """Run the API and the background services (the embedded database when no URL is set).
    Exit code 4 when the API's address cannot be listened on (nothing is started)."""
    from tickwork import serve as serving

    logs.configure(log_level)
    the_app = load_app(app)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    options = serving.ServeOptions(serving.parse_roles(roles), names, concurrency, host, port)
    try:
        serving.run(the_app, options)
    except CannotListen as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_CANNOT_LISTEN) from None


@cli.command()
def demo(log_level: LogLevel = "ERROR") -> None:
    """Show the job path end to end on the embedded database (or TICKWORK_DATABASE_URL)."""
    from tickwork.demo import run_demo

    logs.configure(log_level)
    run_demo()


@cli.command()
def bench(
    workloads: Annotated[
        str, typer.Option("--workload", "-w", help="Comma-separated: " + ", ".join(_WORKLOADS))
    ] = ",".join(_DEFAULT_WORKLOADS),
    jobs: Annotated[int, typer.Option(help="Jobs per throughput workload.", min=1)] = 20_000,
    concurrency: Annotated[int, typer.Option(help="Worker concurrency (drain).", min=1)] = 200,
    processes: Annotated[int, typer.Option(help="Worker processes (drain).", min=1)] = 1,
    batch: Annotated[int, typer.Option(help="Batch size (enqueue-batch).", min=1)] = 1000,
    rate: Annotated[float, typer.Option(help="Jobs per second (latency).", min=0.1)] = 50.0,
    latency_jobs: Annotated[int, typer.Option(help="Jobs measured (latency).", min=10)] = 500,
    steady_rate: Annotated[
        float, typer.Option(help="Jobs per second enqueued (steady).", min=1)
    ] = 5000.0,
    duration: Annotated[float, typer.Option(help="Seconds (steady).", min=10)] = 1800.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Measure enqueue, drain and pickup latency (on the embedded database by default), in a
    schema the run makes for itself and drops at the end."""
    from rich.progress import Progress
    from rich.table import Table

    from tickwork import bench as bench_module

    chosen = [w.strip() for w in workloads.split(",") if w.strip()]
    for name in chosen:
        if name not in _WORKLOADS:
            raise typer.BadParameter(
                f"--workload ({name!r}) must be one of {', '.join(_WORKLOADS)}"
            )
    logs.configure("ERROR")
    out = console(stderr=as_json)
    with Progress(console=out, transient=True) as progress:

        def factory(name: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(name, total=total)
            return lambda done: progress.update(task, completed=done)

        env, results = bench_module.run(
            chosen,
            jobs=jobs,
            concurrency=concurrency,
            processes=processes,
            batch=batch,
            rate=rate,
            latency_jobs=latency_jobs,
            progress_factory=factory,
            duration=duration,
            steady_rate=steady_rate,
        )
    if as_json:
        print_json(bench_module.as_json(env, results))
        return
    settings = ", ".join(f"{k}={v}" for k, v in env.settings.items())
    out.print(
        f"PostgreSQL {env.postgres} ({settings}); Python {env.python}, "
        f"{env.cpus} CPUs, {env.machine}"
    )
    table = Table(title="tickwork bench")
    for column in ("workload", "jobs", "seconds", "jobs/s", "details"):
        table.add_column(column)
    for r in results:
        details = ", ".join(f"{k}={v}" for k, v in r.details.items() if k != "samples")
        rate_text = "-" if r.workload == "latency" else f"{r.per_second:,.0f}"
        table.add_row(r.workload, f"{r.jobs:,}", f"{r.seconds:.2f}", rate_text, details)
    out.print(table)


@cli.command()
def doctor(
    app: AppOption = None,
    xmin_warning: Annotated[
        float, typer.Option(help="Warn when a transaction holds back vacuum this long (s).")
    ] = 300.0,
    as_json: JsonOption = False,
) -> None:
    """Table sizes, dead tuples, HOT updates and what holds back vacuum; exit 1 on warnings."""
    from pydantic import TypeAdapter
    from rich.table import Table

    from tickwork.health import Health

    logs.configure("ERROR")
    report = load_app(app).health(xmin_warning_seconds=xmin_warning)
    if as_json:
        print_json(TypeAdapter(Health).dump_python(report, mode="json"))
        if report.warnings:
            raise typer.Exit(1)
        return
    out = console()
    tables = Table(title="tables")
    for column in ("table", "live", "dead", "HOT updates", "table size", "index size", "vacuumed"):
        tables.add_column(column)
    for t in report.tables:
        hot = "-" if t.hot_ratio is None else f"{t.hot_ratio:.0%} of {t.updates:,}"
        vacuumed = t.last_vacuum.strftime("%Y-%m-%d %H:%M:%S") if t.last_vacuum else "never"
        tables.add_row(
            t.name,
            f"{t.live_tuples:,}",
            f"{t.dead_tuples:,}",
            hot,
            _size(t.table_bytes),
            _size(t.index_bytes),
            vacuumed,
        )
    out.print(tables)
    indexes = Table(title="indexes")
    for column in ("table", "index", "size", "scans"):
        indexes.add_column(column)
    for i in report.indexes:
        indexes.add_row(i.table, i.name, _size(i.bytes), f"{i.scans:,}")
    out.print(indexes)
    oldest = report.oldest_xmin
    if oldest is None:
        out.print("xmin horizon: no open snapshot holds back vacuum")
    else:
        age = "?" if oldest.age_seconds is None else f"{oldest.age_seconds:.0f}s"
        out.print(
            f"xmin horizon: {oldest.holder} {oldest.detail}, open {age}, "
            f"{oldest.xmin_age:,} transactions behind"
        )
    for warning in report.warnings:
        out.print(f"[bold yellow]warning:[/] {warning}")
    if report.warnings:
        raise typer.Exit(1)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


schedules_cli = typer.Typer(
    help="List, pause, resume, trigger and delete stored schedules.", cls=Group
)
cli.add_typer(schedules_cli, name="schedules")


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
def schedules_delete(name: str, app: AppOption = None) -> None:
    """Delete a schedule stored by an operator, or one defined in code that no live worker
    defines any more (its code is gone); the jobs it made stay."""
    from tickwork.cli.jobs import _run as with_pool
    from tickwork.schedule import admin

    actor = cli_actor()
    with_pool(
        app, lambda the_app, pool: admin.delete(pool, the_app.db.statements, name, actor=actor)
    )
    typer.echo(f"deleted {name}")


# The operator commands (users, jobs, queues) live in their own module; importing it
# registers them on `cli`. It imports this module, hence the import at the end.
import tickwork.cli.jobs  # noqa: E402
import tickwork.cli.reactors  # noqa: E402, F401


def main() -> None:
    """Entry point of the ``tickwork`` script: errors become one line and exit code 2."""
    try:
        cli()
    except TickworkError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
