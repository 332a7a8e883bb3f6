"""``manage.py tickwork COMMAND ...``: any tickwork command (``worker``, ``serve``,
``jobs list``, ...) with the project's App: its tasks, ``TICKWORK`` and ``DATABASES``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

APP = "tickwork.contrib.django:app"
"""What ``--app`` names for every command run through Django (``$TICKWORK_APP``)."""


def run_cli(args: list[str]) -> None:
    """Run tickwork's command line with ``args`` and the project's App; a failure is a
    :class:`CommandError` with its exit code (the command has printed why)."""
    from tickwork.cli import main

    os.environ["TICKWORK_APP"] = APP
    try:
        main(args, prog_name="manage.py tickwork")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise CommandError(
                f"tickwork {' '.join(args[:1])} exited with {exc.code}",
                returncode=exc.code if isinstance(exc.code, int) else 1,
            ) from None


class Command(BaseCommand):
    help = "Run a tickwork command (worker, serve, jobs ...) with this project's tasks."

    def run_from_argv(self, argv: list[str]) -> None:
        # everything after "tickwork" is tickwork's, --help included
        run_cli(argv[2:])

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        run_cli(list(args))
