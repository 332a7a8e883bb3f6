"""``manage.py tickwork_worker [OPTIONS]``: ``tickwork worker`` with the project's tasks."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tickwork.contrib.django.management.commands.tickwork import from_code, from_command_line


class Command(BaseCommand):
    help = "Run a tickwork worker with this project's tasks (options: tickwork worker --help)."

    def run_from_argv(self, argv: list[str]) -> None:
        from_command_line(["worker", *argv[2:]])

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        from_code(["worker", *args])
