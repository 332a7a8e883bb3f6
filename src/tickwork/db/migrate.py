"""Schema migrations: numbered ``migrations/NNNN_name.sql`` files applied in order.

Serialised by an advisory lock (several processes may start at once), each file in its own
transaction, recorded in ``<schema>.migrations``; running again applies nothing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from tickwork.db.database import fetch
from tickwork.db.store import Store
from tickwork.errors import MigrationError

log = logging.getLogger("tickwork.migrate")

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema change."""

    version: int
    """Order of application."""
    name: str
    """Descriptive part of the file name."""
    sql: str
    """Its statements, with ``{schema}`` not yet replaced."""


def available() -> list[Migration]:
    """Every migration shipped with the package, in version order."""
    found = []
    for entry in resources.files("tickwork.db").joinpath("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda m: m.version)
    return found


def migrate(conn: psycopg.Connection[Any], store: Store) -> list[int]:
    """Apply what is missing on ``conn`` (autocommit) to ``store``'s schema; return the
    versions applied now."""
    statements = store.statements
    params = {"schema": statements.schema}
    applied_now: list[int] = []
    fetch(conn, statements["migration_lock"], params)
    try:
        fetch(conn, statements["migration_create_schema"], {})
        fetch(conn, statements["migration_create_table"], {})
        done = {row["version"] for row in fetch(conn, statements["migration_applied"], {})}
        for migration in available():
            if migration.version in done:
                continue
            sql = migration.sql.replace("{schema}", statements.schema)
            try:
                with conn.transaction():
                    conn.execute(sql)
                    fetch(
                        conn,
                        statements["migration_record"],
                        {"version": migration.version, "name": migration.name},
                    )
            except psycopg.Error as exc:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} failed: {exc}"
                ) from exc
            log.info("applied migration %04d_%s", migration.version, migration.name)
            applied_now.append(migration.version)
    finally:
        fetch(conn, statements["migration_unlock"], params)
    return applied_now
