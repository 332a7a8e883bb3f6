"""Scratch schemas: a schema a command makes for one run, marks as its own, and drops.

``tickwork bench`` empties its tables between workloads and ``tickwork demo`` drops its
schema when it ends, so both run only in a schema they made: one that does not exist yet is
made and marked (a comment on the schema), one that carries the mark (left by a run that was
killed) is made again, and any other is refused before anything is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from tickwork.db.database import Database, fetch
from tickwork.errors import ConfigError, ConflictError


def is_scratch(conn: psycopg.Connection[Any], db: Database) -> bool | None:
    """None: the schema does not exist; True: a scratch run made it; False: it did not."""
    found = fetch(conn, db.statements["scratch_owner"], {"schema": db.settings.schema_name})
    return bool(found[0]["ours"]) if found else None


def refusal(db: Database, command: str) -> ConfigError:
    """The error for a schema ``command`` did not make."""
    return ConfigError(
        f"schema ({db.settings.schema_name!r}) was not made by tickwork {command}: it empties "
        "and drops its schema, so it runs only in one it makes; name a schema that does not "
        "exist"
    )


@contextmanager
def scratch_schema(db: Database, command: str, *, close: Callable[[], None]) -> Iterator[None]:
    """Make the database's schema, marked, for the length of the block; then ``close`` (the
    pools of the app using it) and drop the schema. A marked schema left by a killed run is
    dropped and made again; an unmarked one is refused (:class:`ConfigError`) and left
    untouched; a second run on the same schema meanwhile is refused (:class:`ConflictError`)."""
    statements = db.statements
    schema = db.settings.schema_name
    with db.connect() as own:  # holds the run's lock until the schema is dropped
        if not fetch(own, statements["scratch_lock"], {"schema": schema})[0]["locked"]:
            raise ConflictError(
                f"another tickwork {command} is running in schema {schema!r}; wait for it to end"
            )
        ours = is_scratch(own, db)
        if ours is False:
            raise refusal(db, command)
        if ours:
            fetch(own, statements["scratch_drop"], {})  # left by a run that was killed
        try:
            with own.transaction():
                fetch(own, statements["scratch_create"], {})
                fetch(own, statements["scratch_mark"], {})
        except psycopg.errors.DuplicateSchema:
            raise refusal(db, command) from None  # made by someone else since it was looked
        try:
            yield
        finally:
            close()
            fetch(own, statements["scratch_drop"], {})


def empty(conn: psycopg.Connection[Any], db: Database, *, every_table: bool = False) -> None:
    """Empty the job tables of a scratch schema (``every_table``: all but the migrations'
    record); the caller checked it is one."""
    if every_table:
        fetch(conn, db.statements["scratch_empty"], {})
    else:
        fetch(conn, db.statements["scratch_truncate"], {})


def mark(conn: psycopg.Connection[Any], db: Database) -> None:
    """Mark the database's (existing) schema as a scratch schema: one a test database holds,
    dropped with it, which :func:`tickwork.testing.clean` may therefore empty."""
    fetch(conn, db.statements["scratch_mark"], {})
