"""The ``tickwork`` command line."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

from tickwork import logs
from tickwork.app import App
from tickwork.errors import TickworkError

cli = typer.Typer(
    name="tickwork",
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


def load_app(path: str | None) -> App:
    """Import ``module:attribute``; with no path, a bare App from the settings."""
    if path is None:
        return App()
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise typer.BadParameter(f"--app ({path!r}) must look like 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(
            f"--app ({path!r}): cannot import {module_name!r}: {exc}"
        ) from None
    found = getattr(module, attribute, None)
    if not isinstance(found, App):
        raise typer.BadParameter(f"--app ({path!r}): {attribute!r} is not a tickwork App")
    return found


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
    if app is not None and "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, ".")
    the_app = load_app(app)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    the_app.run_worker(queues=names, concurrency=concurrency)


@cli.command()
def demo(log_level: LogLevel = "ERROR") -> None:
    """Show the job path end to end on the embedded database (or TICKWORK_DATABASE_URL)."""
    from tickwork.demo import run_demo

    logs.configure(log_level)
    run_demo()


def main() -> None:
    """Entry point of the ``tickwork`` script: errors become one line and exit code 2."""
    try:
        cli()
    except TickworkError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
