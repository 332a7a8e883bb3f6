"""The Django app: each installed app's tasks module imported, and tickwork's schema migrated
after Django's own migrations of its database."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TickworkConfig(AppConfig):
    name = "tickwork.contrib.django"
    label = "tickwork"
    verbose_name = "tickwork"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from tickwork.contrib.django.conf import config, get_app

        get_app()  # a bad TICKWORK setting fails the start, naming the key
        autodiscover_modules(config().tasks_module)
        post_migrate.connect(migrate_schema, dispatch_uid="tickwork.migrate_schema")


def migrate_schema(sender: AppConfig, using: str = "default", **_: Any) -> None:
    """After ``migrate`` of tickwork's database (once, on this app's signal): its schema
    migrated, in the database Django has just migrated (the test database under the test
    runner: the URL is read from ``DATABASES`` now). In a test database (Django's test runner
    or pytest-django's) the schema is also marked as made for tests, before any clone of it
    is made for ``--parallel``: :func:`tickwork.testing.clean` may empty it."""
    from tickwork.contrib.django.conf import config, get_app
    from tickwork.contrib.django.test import is_test_database
    from tickwork.db.scratch import mark

    found = config()
    if sender.name != TickworkConfig.name or not found.migrate or using != found.database:
        return
    app = get_app()
    app.migrate()
    if is_test_database(using):
        with app.db.connect() as conn:
            mark(conn, app.db)
