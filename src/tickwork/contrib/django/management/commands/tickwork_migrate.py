"""``manage.py tickwork_migrate``: migrate tickwork's schema in the ``TICKWORK['DATABASE']``
database (``manage.py migrate`` does it too, unless ``TICKWORK['MIGRATE']`` is False)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tickwork.contrib.django.conf import config, get_app
from tickwork.errors import TickworkError


class Command(BaseCommand):
    help = "Apply tickwork's pending schema migrations to its Django database."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            applied = get_app().migrate()
        except TickworkError as exc:  # one line, as Django prints a command's failure
            raise CommandError(f"tickwork: {exc}") from exc
        found = config()
        where = f"schema {found.schema!r} of database {found.database!r}"
        if applied:
            self.stdout.write(f"tickwork: applied {len(applied)} migration(s) to {where}")
        else:
            self.stdout.write(f"tickwork: {where} is up to date")
