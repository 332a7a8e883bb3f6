"""Scratch schemas: a schema a command makes for one run, marks as its own, and drops.

``tickwork bench`` empties its tables between workloads and ``tickwork demo`` drops its
schema when it ends, so both run only in a schema they made: one that does not exist yet is
made and marked (a comment on the schema), one that carries the mark (left by a run that was
killed) is made again, and any other is refused before anything is touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from tickwork.db.database import fetch
from tickwork.errors import ConfigError, ConflictError

if TYPE_CHECKING:
    from tickwork.app import App


def is_scratch(conn: psycopg.Connection[Any], app: App) -> bool | None:
    """None: the app's schema does not exist; True: a scratch run made it; False: it did not."""
    found = fetch(conn, app.db.statements["scratch_owner"], {"schema": app.settings.schema_name})
    return bool(found[0]["ours"]) if found else None


def refusal(app: App, command: str) -> ConfigError:
    """The error for a schema ``command`` did not make."""
    return ConfigError(
        f"schema ({app.settings.schema_name!r}) was not made by tickwork {command}: it empties "
        "and drops its schema, so it runs only in one it makes; name a schema that does not "
        "exist"
    )


@contextmanager
def scratch_schema(app: App, command: str) -> Iterator[None]:
    """Make the app's schema, marked, for the length of the block; then close the app and
    drop the schema. A marked schema left by a killed run is dropped and made again; an
    unmarked one is refused (:class:`ConfigError`) and left untouched; a second run on the
    same schema meanwhile is refused (:class:`ConflictError`)."""
    statements = app.db.statements
    schema = app.settings.schema_name
    with app.db.connect() as own:  # holds the run's lock until the schema is dropped
        if not fetch(own, statements["scratch_lock"], {"schema": schema})[0]["locked"]:
            raise ConflictError(
                f"another tickwork {command} is running in schema {schema!r}; wait for it to end"
            )
        ours = is_scratch(own, app)
        if ours is False:
            raise refusal(app, command)
        if ours:
            fetch(own, statements["scratch_drop"], {})  # left by a run that was killed
        try:
            with own.transaction():
                fetch(own, statements["scratch_create"], {})
                fetch(own, statements["scratch_mark"], {})
        except psycopg.errors.DuplicateSchema:
            raise refusal(app, command) from None  # made by someone else since it was looked
        try:
            yield
        finally:
            app.close()
            fetch(own, statements["scratch_drop"], {})


def empty(conn: psycopg.Connection[Any], app: App) -> None:
    """Empty the tables of a scratch schema (the caller checked it is one)."""
    fetch(conn, app.db.statements["scratch_truncate"], {})
