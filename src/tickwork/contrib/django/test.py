"""``TEST_RUNNER = "tickwork.contrib.django.test.TestRunner"``: Django's test runner, which
also marks tickwork's schema in the test database as made for tests (so
:func:`tickwork.testing.clean` may empty it), and closes tickwork's connections before the
test database is dropped (PostgreSQL refuses to drop a database others are connected to)."""

from __future__ import annotations

from typing import Any

from django.test.runner import DiscoverRunner


class TestRunner(DiscoverRunner):
    """:class:`~django.test.runner.DiscoverRunner`, with tickwork's schema marked as made
    for tests, and tickwork's pools closed at the end."""

    def setup_databases(self, **kwargs: Any) -> Any:
        from tickwork.contrib.django.conf import get_app
        from tickwork.db.scratch import mark

        old_config = super().setup_databases(**kwargs)
        app = get_app()
        with app.db.connect() as conn:  # the test database: DATABASES now names it
            mark(conn, app.db)
        return old_config

    def teardown_databases(self, old_config: Any, **kwargs: Any) -> None:
        from tickwork.contrib.django.conf import get_app

        get_app().close()
        super().teardown_databases(old_config, **kwargs)
