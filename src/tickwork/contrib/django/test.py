"""``TEST_RUNNER = "tickwork.contrib.django.test.TestRunner"``: Django's test runner, which
also empties tickwork's schema in the test database and marks it as made for tests (so
:func:`tickwork.testing.clean` may empty it), and closes tickwork's connections before the
test database is dropped (PostgreSQL refuses to drop a database others are connected to).

Only a test database is ever marked or emptied: the one Django made for this run (or its
clones, one per process of ``--parallel``). When ``TICKWORK['DATABASE']`` is not among the
databases the run's tests use, Django makes no test database for it, and its settings still
name the real database: that one is left untouched, and tickwork refuses to connect to it
until the run ends, as Django refuses queries to a database a test did not declare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from django.test.runner import DiscoverRunner

from tickwork.db.database import Database
from tickwork.errors import ConfigError


class TestRunner(DiscoverRunner):
    """:class:`~django.test.runner.DiscoverRunner`, with tickwork's schema emptied and marked
    in each test database, and tickwork's pools closed at the end."""

    _url_source: Callable[[], str] | None = None
    _direct_url_source: Callable[[], str] | None = None

    def setup_databases(self, **kwargs: Any) -> Any:
        from django.db import connections

        from tickwork.contrib.django.conf import config, conninfo_of, get_app

        old_config = super().setup_databases(**kwargs)
        alias, direct = config().database, config().direct_database
        db = get_app().db
        if direct is not None and not is_test_database(direct):
            self._direct_url_source, db.direct_url_source = (
                db.direct_url_source,
                refusing(direct, "DIRECT_DATABASE"),
            )
        if not is_test_database(alias):
            self._url_source, db.url_source = db.url_source, refusing(alias)
        else:
            creation = connections[alias].creation
            # each process of --parallel runs in a clone of its own, made before this (and
            # kept as it was by --keepdb): each is readied as the test database is
            clones = [
                creation.get_test_db_clone_settings(str(index + 1))
                for index in range(self.parallel if self.parallel > 1 else 0)
            ]
            for given in [connections[alias].settings_dict, *clones]:
                with psycopg.connect(conninfo_of(given), autocommit=True) as conn:
                    ready_test_schema(conn, db)
        return old_config

    def teardown_databases(self, old_config: Any, **kwargs: Any) -> None:
        from tickwork.contrib.django.conf import get_app

        close_connections()
        db = get_app().db
        if self._url_source is not None:
            db.url_source, self._url_source = self._url_source, None
        if self._direct_url_source is not None:
            db.direct_url_source, self._direct_url_source = self._direct_url_source, None
        super().teardown_databases(old_config, **kwargs)


def close_connections() -> None:
    """Close what keeps the test database from being dropped: tickwork's pools, and Django's
    connections of threads that have ended (the handler threads of :func:`~tickwork.testing.drain`
    and :func:`~tickwork.testing.eager`, whose stale connections are kept under
    ``CONN_MAX_AGE``, or a test's own thread). Those are closed only when the garbage
    collector frees them (Django's connection objects hold reference cycles): collected
    now, they are closed now."""
    import gc

    from tickwork.contrib.django.conf import get_app

    get_app().close()
    gc.collect()


def refusing(alias: str, key: str = "DATABASE") -> Callable[[], str]:
    """What tickwork reads as its database's URL while a test run made no test database for
    ``alias`` (``TICKWORK[key]``): a refusal naming the remedy, never the real database's
    URL."""

    def url() -> str:
        raise ConfigError(
            f"TICKWORK[{key!r}] ({alias!r}) has no test database in this test run (no"
            f" test uses it), so tickwork does not connect to the real one: add {alias!r}"
            " to the databases of the tests that use tickwork (or run the tests without the"
            " pooler, with no DIRECT_DATABASE)"
            if key == "DIRECT_DATABASE"
            else f"TICKWORK[{key!r}] ({alias!r}) has no test database in this test run (no"
            f" test uses it), so tickwork does not connect to the real one: add {alias!r}"
            " to the databases of the tests that use tickwork"
        )

    return url


def is_test_database(alias: str) -> bool:
    """Whether Django's settings of ``alias`` name its test database now: a test runner (this
    one, or pytest-django's) has made it and pointed the settings at it. False for a database
    the run's tests do not use (its settings still name the real one), and outside tests."""
    from django.db import connections
    from django.test.utils import _TestState

    if not hasattr(_TestState, "saved_data"):  # setup_test_environment() was not called
        return False
    connection = connections[alias]
    return bool(connection.settings_dict["NAME"] == connection.creation._get_test_db_name())


def ready_test_schema(conn: psycopg.Connection[Any], db: Database) -> None:
    """In a test database: tickwork's schema (when migrated) emptied of what an earlier run
    left (``--keepdb``) and marked as made for tests."""
    from tickwork.db.scratch import empty, is_scratch, mark

    if is_scratch(conn, db) is None:
        return  # not migrated there (TICKWORK['MIGRATE'] is False): nothing to ready
    mark(conn, db)
    empty(conn, db, every_table=True)
