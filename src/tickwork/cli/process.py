"""The root's own commands: ``tickwork migrate``, ``worker``, ``serve`` and ``demo``, which
run tickwork, and ``bench`` and ``doctor``, which measure it and its tables.

:data:`COMMANDS` lists them; :mod:`tickwork.cli` registers them on the root.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated

import typer

from tickwork import logs
from tickwork.cli.bench import WORKLOADS as _WORKLOADS
from tickwork.cli.common import (
    AppOption,
    ConcurrencyOption,
    JsonOption,
    LogLevel,
    QueuesOption,
    ThreadsOption,
    console,
    load_app,
    print_json,
    queue_names,
    run_with_pool,
)
from tickwork.errors import ConfigError
from tickwork.serve import EXIT_CANNOT_LISTEN, ROLES, CannotListen
from tickwork.worker.run import catch_stop_signals_early

__all__ = ["COMMANDS", "bench", "demo", "doctor", "mcp", "migrate", "serve", "worker"]

_DEFAULT_WORKLOADS = ("enqueue-single", "enqueue-batch", "drain", "latency")


def migrate(app: AppOption = None, log_level: LogLevel = "INFO") -> None:
    """Apply pending schema migrations (safe to run from several processes at once)."""
    logs.configure(log_level)
    applied = load_app(app).migrate()
    typer.echo(f"applied migrations: {applied}" if applied else "schema is up to date")


def worker(
    app: AppOption = None,
    queues: QueuesOption = None,
    concurrency: ConcurrencyOption = None,
    threads: ThreadsOption = None,
    runtime: Annotated[
        str | None,
        typer.Option(
            "--runtime",
            help="Run one runtime's definitions (http, bash, python, node, groovy) on its "
            "queue alone; refuses to start when this machine lacks its interpreter.",
        ),
    ] = None,
    log_level: LogLevel = "INFO",
) -> None:
    """Run a worker: claim and run jobs until SIGTERM or SIGINT."""
    catch_stop_signals_early()
    logs.configure(log_level)
    the_app = load_app(app)
    names = queue_names(queues)
    if runtime is not None:
        from tickwork.runtimes import available

        if names is not None:
            raise ConfigError("--runtime takes its runtime's queue; leave out --queues")
        queue = available.check(runtime, the_app.settings.runtimes)
        if concurrency is None:
            concurrency = available.concurrency(runtime, the_app.settings.runtimes)
        typer.echo(f"runtime {runtime}: claiming from queue {queue} ({concurrency} at once)")
    else:  # refused before anything starts (the app's worker would refuse them too)
        from tickwork.runtimes import available

        available.refuse_runtime_queues(the_app.settings.worker.queues if names is None else names)
    the_app.run_worker(queues=names, concurrency=concurrency, threads=threads, runtime=runtime)


def serve(
    app: AppOption = None,
    roles: Annotated[
        str | None,
        typer.Option(
            "--roles",
            help=f"Comma-separated: {', '.join(ROLES)} (default: all).",
        ),
    ] = None,
    queues: QueuesOption = None,
    concurrency: ConcurrencyOption = None,
    threads: ThreadsOption = None,
    host: Annotated[str | None, typer.Option(help="Address the API listens on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port the API listens on.")] = None,
    log_level: LogLevel = "INFO",
) -> None:
    """Run the API and the background services (the embedded database when no URL is set).
    Exit code 4 when the API's address cannot be listened on (nothing is started)."""
    from tickwork import serve as serving

    catch_stop_signals_early()
    logs.configure(log_level)
    the_app = load_app(app)
    names = queue_names(queues)
    options = serving.ServeOptions(
        serving.parse_roles(roles), names, concurrency, host, port, threads
    )
    try:
        serving.run(the_app, options)
    except CannotListen as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_CANNOT_LISTEN) from None


def mcp(
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Talk MCP over stdin and stdout (a desktop assistant).")
    ] = False,
    app: AppOption = None,
    log_level: LogLevel = "WARNING",
) -> None:
    """The MCP tools for a local assistant, as the person whose API token is in
    TICKWORK_MCP_TOKEN (an environment variable, so it is not in the process list). Over
    HTTP, `tickwork serve` answers at /mcp."""
    import os

    from tickwork.mcp.server import run_stdio

    if not stdio:
        raise ConfigError("say --stdio (over HTTP, tickwork serve answers MCP at /mcp)")
    token = os.environ.get("TICKWORK_MCP_TOKEN", "").strip()
    if not token:
        raise ConfigError(
            "TICKWORK_MCP_TOKEN is not set: create a personal API token (tickwork serve's"
            " dashboard, Your account; or POST /api/me/tokens) and put it there"
        )
    logs.configure(log_level)  # to stderr: stdout carries the protocol
    asyncio.run(run_stdio(load_app(app), token))


def demo(log_level: LogLevel = "ERROR") -> None:
    """Show the job path end to end on the embedded database (or TICKWORK_DATABASE_URL)."""
    from tickwork.cli.demo import run_demo

    logs.configure(log_level)
    run_demo(console())  # not cut to 80 columns in a pipe


def bench(
    workloads: Annotated[
        str, typer.Option("--workload", "-w", help="Comma-separated: " + ", ".join(_WORKLOADS))
    ] = ",".join(_DEFAULT_WORKLOADS),
    jobs: Annotated[int, typer.Option(help="Jobs per throughput workload.", min=1)] = 20_000,
    concurrency: Annotated[
        int | None,
        typer.Option(help="Worker concurrency (drain, steady; default: the worker's).", min=1),
    ] = None,
    processes: Annotated[int, typer.Option(help="Worker processes (drain).", min=1)] = 1,
    batch: Annotated[int, typer.Option(help="Batch size (enqueue-batch).", min=1)] = 1000,
    rate: Annotated[float, typer.Option(help="Jobs per second (latency).", min=0.1)] = 50.0,
    latency_jobs: Annotated[int, typer.Option(help="Jobs measured (latency).", min=10)] = 500,
    steady_rate: Annotated[
        float, typer.Option(help="Jobs per second enqueued (steady).", min=1)
    ] = 5000.0,
    duration: Annotated[float, typer.Option(help="Seconds (steady).", min=10)] = 1800.0,
    background_rate: Annotated[
        float, typer.Option(help="Jobs per second of background load (latency-loaded).", min=1)
    ] = 5000.0,
    in_flight: Annotated[
        int, typer.Option(help="Jobs running at once (memory).", min=1, max=10_000)
    ] = 5000,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Measure enqueue, drain and pickup latency (on the embedded database by default), in a
    schema the run makes for itself and drops at the end."""
    from rich.progress import Progress
    from rich.table import Table

    from tickwork.cli import bench as bench_module

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
            background_rate=background_rate,
            in_flight=in_flight,
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
        rate_text = (
            "-" if r.workload in ("latency", "latency-loaded", "memory") else f"{r.per_second:,.0f}"
        )
        table.add_row(r.workload, f"{r.jobs:,}", f"{r.seconds:.2f}", rate_text, details)
    out.print(table)


def doctor(
    app: AppOption = None,
    xmin_warning: Annotated[
        float, typer.Option(help="Warn when a transaction holds back vacuum this long (s).")
    ] = 300.0,
    recount: Annotated[
        bool,
        typer.Option(
            "--recount",
            help="First make the counts of finished jobs and settled signals again from the"
            " tables (a full scan; after states were changed by hand in SQL).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Table sizes, dead tuples, HOT updates and what holds back vacuum; exit 1 on warnings."""
    from pydantic import TypeAdapter
    from rich.table import Table

    from tickwork.ops.health import Health
    from tickwork.ops.rollups import recount as recount_totals

    logs.configure("ERROR")
    if recount:
        counted = run_with_pool(app, lambda the_app, pool: recount_totals(pool, the_app.db.store))
        if not as_json:
            console().print(f"recounted: {counted:,} finished jobs and settled signals")
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


COMMANDS: tuple[Callable[..., None], ...] = (migrate, worker, serve, mcp, demo, bench, doctor)
"""The root's own commands, in the order ``tickwork --help`` lists them."""
