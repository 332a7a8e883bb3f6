"""``manage.py tickwork COMMAND ...``: any tickwork command (``worker``, ``serve``,
``jobs list``, ...) with the project's App: its tasks, ``TICKWORK`` and ``DATABASES``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

APP = "tickwork.contrib.django:app"
"""What ``--app`` names for every command run through Django (``$TICKWORK_APP``)."""
DJANGO_OPTIONS = ("--settings", "--pythonpath")
"""Options of every ``manage.py`` command, applied by Django before the command runs: not
passed on to tickwork, which has no such options."""


def run_cli(args: Sequence[str]) -> int:
    """Run tickwork's command line with ``args`` and the project's App; its exit code (on a
    failure the command has printed why)."""
    from tickwork.cli import main

    os.environ["TICKWORK_APP"] = APP
    try:
        main(list(args), prog_name="manage.py tickwork")
    except SystemExit as exc:
        if exc.code in (0, None):
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def from_command_line(args: Sequence[str]) -> None:
    """``manage.py``'s run of ``args``: Django's own options left out, and the process's exit
    code tickwork's (2 for a wrong argument), as tickwork's own script exits, with no
    traceback; Django's connections closed at the end, as after any command."""
    from django.db import connections

    try:
        code = run_cli(without_django_options(args))
    finally:
        connections.close_all()
    if code:
        sys.exit(code)


def from_code(args: Sequence[str]) -> None:
    """``call_command``'s run of ``args``: a failure is a :class:`CommandError` with the exit
    code (the command has printed why)."""
    code = run_cli(args)
    if code:
        command = " ".join(["tickwork", *args[:1]])
        raise CommandError(f"{command} exited with {code}", returncode=code)


def without_django_options(args: Sequence[str]) -> list[str]:
    """``args`` without :data:`DJANGO_OPTIONS` (``--settings X`` or ``--settings=X``); all
    after ``--`` is kept as it is."""
    kept: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            kept += [arg, *rest]
            break
        if arg.split("=", 1)[0] in DJANGO_OPTIONS:
            if "=" not in arg:
                next(rest, None)  # its value
            continue
        kept.append(arg)
    return kept


class Command(BaseCommand):
    help = "Run a tickwork command (worker, serve, jobs ...) with this project's tasks."

    def run_from_argv(self, argv: list[str]) -> None:
        # everything after "tickwork" is tickwork's, --help included
        from_command_line(argv[2:])

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        from_code(args)
