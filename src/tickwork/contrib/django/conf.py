"""The ``TICKWORK`` setting of a Django project, and the one App made from it.

``TICKWORK`` is a dict; every key is optional:

- ``DATABASE`` (``"default"``): the alias in ``DATABASES`` whose database holds tickwork's
  schema, and whose connection a ``defer()`` or ``emit()`` without ``conn`` joins;
- ``SCHEMA`` (``"tickwork"``): tickwork's schema in that database, beside Django's tables
  (not ``public``, where Django's are);
- ``MIGRATE`` (``True``): ``manage.py migrate`` of that database also migrates tickwork's
  schema (after Django's own migrations, never as one of them);
- ``TASKS_MODULE`` (``"tasks"``): the module of each installed app imported at start, where
  its tasks are defined;
- ``SETTINGS`` (``{}``): any other tickwork setting, nested as in ``tickwork.toml``
  (``{"worker": {"concurrency": 20}}``);
- ``DIRECT_DATABASE`` (none): behind a transaction pooler (PgBouncer's ``pool_mode =
  transaction``, with ``SETTINGS`` ``{"database_pooler": "transaction"}``), the alias in
  ``DATABASES`` that reaches PostgreSQL itself, for the connections that need a session of
  their own (LISTEN, migrations): tickwork's ``database_direct_url``.

The database URLs are never settings here: they come from ``DATABASES``, read each time a
connection is opened (Django's test runner points them at the test database).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import make_conninfo

from tickwork.app import App
from tickwork.errors import ConfigError

KEYS = frozenset({"DATABASE", "SCHEMA", "MIGRATE", "TASKS_MODULE", "SETTINGS", "DIRECT_DATABASE"})
DJANGO_ONLY_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "assume_role", "pool"}
    | {"prepare_threshold", "cursor_factory", "context", "autocommit", "row_factory"}
)
"""Keys of a database's ``OPTIONS`` that are not libpq's: those Django reads itself, and the
arguments of psycopg's ``connect()`` Django passes on (``prepare_threshold`` for a pooler);
in a connection string libpq refuses them. The others are libpq's."""

DJANGOS_SCHEMAS = frozenset({"public"})
"""Where Django's tables are (the first schema of PostgreSQL's default search path): never
tickwork's schema, which a test run empties whole and marks as its own."""

_lock = threading.Lock()
_app: App | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """The ``TICKWORK`` setting, checked."""

    database: str = "default"
    schema: str = "tickwork"
    migrate: bool = True
    tasks_module: str = "tasks"
    settings: dict[str, Any] | None = None
    direct_database: str | None = None


def config() -> Config:
    """``settings.TICKWORK``, checked: an unknown key or a wrong type is refused, named."""
    from django.conf import settings
    from django.db import connections

    given = getattr(settings, "TICKWORK", {})
    if not isinstance(given, dict):
        raise ConfigError(f"TICKWORK must be a dict, not {type(given).__name__}")
    unknown = sorted(set(given) - KEYS)
    if unknown:
        raise ConfigError(
            f"TICKWORK: unknown key(s) {', '.join(map(repr, unknown))}; known: {sorted(KEYS)}"
        )
    found = Config(
        database=given.get("DATABASE", "default"),
        schema=given.get("SCHEMA", "tickwork"),
        migrate=given.get("MIGRATE", True),
        tasks_module=given.get("TASKS_MODULE", "tasks"),
        settings=given.get("SETTINGS", {}),
        direct_database=given.get("DIRECT_DATABASE"),
    )
    for key, value, kind in (
        ("DATABASE", found.database, str),
        ("SCHEMA", found.schema, str),
        ("MIGRATE", found.migrate, bool),
        ("TASKS_MODULE", found.tasks_module, str),
        ("SETTINGS", found.settings, dict),
        ("DIRECT_DATABASE", found.direct_database, str | None),
    ):
        if not isinstance(value, kind):
            named = getattr(kind, "__name__", "str")
            raise ConfigError(f"TICKWORK[{key!r}] must be a {named}, not {value!r}")
    for key, alias in (("DATABASE", found.database), ("DIRECT_DATABASE", found.direct_database)):
        if alias is None:
            continue
        if alias not in connections.settings:
            raise ConfigError(f"TICKWORK[{key!r}] ({alias!r}) is not in DATABASES")
        engine = connections.settings[alias].get("ENGINE", "")
        if "postgresql" not in engine and "postgis" not in engine:
            raise ConfigError(
                f"TICKWORK[{key!r}] ({alias!r}) must be a PostgreSQL database, not {engine!r}"
            )
    if found.schema in DJANGOS_SCHEMAS:
        raise ConfigError(
            f"TICKWORK['SCHEMA'] ({found.schema!r}) holds Django's own tables: tickwork's"
            " schema must be one of its own (tests empty every table in it)"
        )
    settings_given = dict(found.settings or {})
    for reserved in ("database_url", "database_direct_url", "schema", "schema_name"):
        if reserved in settings_given:
            raise ConfigError(
                f"TICKWORK['SETTINGS'] may not set {reserved!r}: it comes from DATABASES"
                " (TICKWORK['DATABASE'] and TICKWORK['DIRECT_DATABASE']) and TICKWORK['SCHEMA']"
            )
    pooled = settings_given.get("database_pooler") == "transaction"
    if pooled and found.direct_database is None:
        raise ConfigError(
            "TICKWORK['SETTINGS']['database_pooler'] ('transaction') needs"
            " TICKWORK['DIRECT_DATABASE']: the alias in DATABASES that reaches PostgreSQL"
            " itself (not the pooler), for LISTEN and migrations"
        )
    if found.direct_database is not None and not pooled:
        raise ConfigError(
            "TICKWORK['DIRECT_DATABASE'] is for a database behind a transaction pooler: set"
            " TICKWORK['SETTINGS']['database_pooler'] to 'transaction' too"
        )
    return found


def url_of(alias: str) -> str:
    """The libpq URL of Django's database ``alias``, from its settings now."""
    from django.db import connections

    return conninfo_of(connections[alias].settings_dict)


def conninfo_of(given: Mapping[str, Any]) -> str:
    """The libpq URL of a database of ``DATABASES`` (a test database clone's too)."""
    params: dict[str, Any] = {
        "dbname": given.get("NAME") or None,
        "user": given.get("USER") or None,
        "password": given.get("PASSWORD") or None,
        "host": given.get("HOST") or None,
        "port": str(given["PORT"]) if given.get("PORT") else None,
    }
    for key, value in (given.get("OPTIONS") or {}).items():
        if key not in DJANGO_ONLY_OPTIONS:
            params[key] = value
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def closing_connections(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a worker runs it: Django's stale connections of the thread are closed before
    and after the job, as Django does around a request (``CONN_MAX_AGE`` applies)."""
    import functools

    from django.db import close_old_connections

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run


def closing_connections_async(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """:func:`closing_connections` for an async handler: the stale connections closed are
    those of the thread Django's async ORM runs its queries in (``sync_to_async``'s), where
    a connection the server dropped would otherwise fail every later job."""
    import functools

    from asgiref.sync import sync_to_async
    from django.db import close_old_connections

    close = sync_to_async(close_old_connections)  # thread-sensitive: the ORM's own thread

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        await close()
        try:
            return await fn(*args, **kwargs)
        finally:
            await close()

    return run


def get_app() -> App:
    """The project's App: made once, from ``TICKWORK`` and ``DATABASES``."""
    global _app
    with _lock:
        if _app is None:
            _app = _make_app(config())
        return _app


def _make_app(found: Config) -> App:
    from django.db import connections

    alias, direct = found.database, found.direct_database
    urls: dict[str, Any] = {}
    if direct is not None:  # checked now (not the same address, ...), read live after
        urls = {"database_url": url_of(alias), "database_direct_url": url_of(direct)}
    app = App(schema=found.schema, **urls, **(found.settings or {}))
    app.db.url_source = lambda: url_of(alias)
    if direct is not None:
        app.db.direct_url_source = lambda: url_of(direct)
    app.db.joined = lambda: connections[alias]
    app.wrap_sync_handler = closing_connections
    app.wrap_async_handler = closing_connections_async
    return app
