"""What every command group of the ``tickwork`` command line shares: the help that shows no
value hint beside a flag, the common options, loading ``--app``, the audit actor, output
(JSON, tables, times) and a session on the app's async pool. Nothing here imports a command
module: they import this.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib
import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
import typer.core
from psycopg_pool import AsyncConnectionPool

from tickwork import logs
from tickwork.app import App
from tickwork.db.driver_errors import translating
from tickwork.errors import ConfigError, TickworkError
from tickwork.limits import cut

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "PIPED_WIDTH",
    "AppOption",
    "ConcurrencyOption",
    "Group",
    "JsonOption",
    "LogLevel",
    "QueuesOption",
    "cli_actor",
    "console",
    "load_app",
    "print_json",
    "print_table",
    "queue_names",
    "run_with_pool",
    "utc_time",
]

T = TypeVar("T")


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


AppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        "-a",
        envvar="TICKWORK_APP",
        show_envvar=False,
        help="Your App object as 'module:attribute' (e.g. myproj.jobs:app);"
        " default: $TICKWORK_APP.",
    ),
]
LogLevel = Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking to confirm.")]
"""``--yes``: a deletion that would ask to confirm does not."""
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (the API's shape) instead of a table.")
]

QueuesOption = Annotated[
    str | None, typer.Option("--queues", "-q", help="Comma-separated queues to claim from.")
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option("--concurrency", "-c", help="Most jobs running at once (default 100).", min=1),
]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        help="Most sync handlers running at once (default: --concurrency when given, else 10).",
        min=1,
    ),
]


def queue_names(queues: str | None) -> list[str] | None:
    """``--queues a,b`` as a list (None when not given: the settings' queues)."""
    return [q.strip() for q in queues.split(",") if q.strip()] if queues else None


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


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A titled table on stdout, its values folded rather than cut short."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for column in columns:
        # Values (ids, emails) wrap rather than being cut short; header words stay whole.
        table.add_column(column, overflow="fold", min_width=max(map(len, column.split())))
    for row in rows:  # values are text, never markup: "[/bold]" in an error is shown as is
        table.add_row(*(Text(value) for value in row))
    console().print(table)  # piped: a line per row, not wrapped at 80 columns


def utc_time(value: datetime | None) -> str:
    """A time in UTC to the second (``2030-01-31 09:00:00``); ``-`` for none."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


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
    except TickworkError:
        raise  # the app's own definition refused (a bad setting, a task defined twice)
    except Exception as exc:  # a bug in the module: its traceback, then the one line
        traceback.print_exc(file=sys.stderr)
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ConfigError(
            f"--app ({path!r}): importing {module_name!r} failed: "
            f"{type(exc).__name__}: {cut(first, 200)} (the traceback above shows where)"
        ) from None
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


def run_with_pool(
    app: str | None, work: Callable[[App, AsyncConnectionPool[Any]], Awaitable[T]]
) -> T:
    """Run ``work`` with the app's async pool on a fresh event loop and close the pool after.
    Driver errors become a :class:`DatabaseError` (one line and exit code 2 in ``main``)."""
    logs.configure("ERROR")
    the_app = load_app(app)

    async def session() -> T:
        try:
            with translating():  # PoolTimeout included: the database is unreachable
                return await work(the_app, await the_app.db.async_pool())
        finally:
            await the_app.aclose()

    return asyncio.run(session())
