"""The ``tickwork`` command line: the root command, which gathers a module per command group.

- :mod:`~tickwork.cli.process`: ``migrate``, ``worker``, ``serve``, ``demo``, ``bench``,
  ``doctor`` (the root's own commands)
- :mod:`~tickwork.cli.schedules`, :mod:`~tickwork.cli.users`, :mod:`~tickwork.cli.jobs`,
  :mod:`~tickwork.cli.queues`, :mod:`~tickwork.cli.signals`, :mod:`~tickwork.cli.reactors`,
  :mod:`~tickwork.cli.definitions`, :mod:`~tickwork.cli.monitoring`:
  a Typer group each, added here under its name
- :mod:`~tickwork.cli.common`: what they share (options, ``--app``, output, the pool)

Exit codes: 0 done; 1 ``doctor`` found something to warn about; 2 a usage error or an error
tickwork reports in one line (``error: ...`` on stderr); 4 ``serve`` cannot listen on the
API's address (:data:`tickwork.serve.EXIT_CANNOT_LISTEN`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork import __version__
from tickwork.cli import (
    definitions,
    jobs,
    monitoring,
    process,
    queues,
    reactors,
    schedules,
    signals,
    users,
)
from tickwork.cli.common import Group, cli_actor
from tickwork.errors import TickworkError

__all__ = ["cli", "cli_actor", "main"]

cli = typer.Typer(
    name="tickwork",
    cls=Group,
    help="PostgreSQL-native background work: jobs, workers and their control.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"tickwork {__version__}")
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


for _command in process.COMMANDS:
    cli.command()(_command)
cli.add_typer(schedules.schedules_cli, name="schedules")
cli.add_typer(users.users_cli, name="users")
cli.add_typer(jobs.jobs_cli, name="jobs")
cli.add_typer(queues.queues_cli, name="queues")
cli.add_typer(signals.signals_cli, name="signals")
cli.add_typer(reactors.reactors_cli, name="reactors")
cli.add_typer(definitions.definitions_cli, name="definitions")
cli.add_typer(monitoring.monitoring_cli, name="monitoring")


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """Entry point of the ``tickwork`` script (``args``: the command line after the program's
    name; default ``sys.argv``): errors become one line and exit code 2."""
    try:
        cli(args=args, prog_name=prog_name)
    except TickworkError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
