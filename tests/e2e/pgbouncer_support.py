"""A PgBouncer of a test's own in front of the test database: transaction pooling, trust
authentication, a free port, its configuration in a temporary directory, stopped at the end."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .support import HANG_GUARD, free_port

SERVER_CONNECTIONS = 4
"""Server connections the pooler keeps per database and user: few, so every client's
statements share the same handful of sessions (what a leak of session state would reach)."""


@dataclass
class Bouncer:
    """A running PgBouncer and the URLs through it and around it."""

    pooled_url: str
    """The test database through the pooler."""
    direct_url: str
    """The test database itself."""
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def require_pgbouncer() -> str:
    """The pgbouncer executable; the test skips, saying why, when it is not installed."""
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )
    if found is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    return found


@contextlib.contextmanager
def running_bouncer(database_url: str, users: Sequence[str] = ()) -> Iterator[Bouncer]:
    """Start PgBouncer in front of ``database_url``'s server for its user and ``users``."""
    executable = require_pgbouncer()
    params = conninfo_to_dict(database_url)
    user = str(params.get("user") or os.environ.get("PGUSER") or getpass.getuser())
    host = str(params.get("host") or "127.0.0.1")
    server_port = str(params.get("port") or 5432)
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="tickwork-pgbouncer-"))
    auth_file = workdir / "users.txt"
    auth_file.write_text("".join(f'"{name}" ""\n' for name in (user, *users)))
    config = workdir / "pgbouncer.ini"
    config.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={host} port={server_port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {auth_file}",
                "pool_mode = transaction",
                f"default_pool_size = {SERVER_CONNECTIONS}",
                "max_client_conn = 500",
                "server_lifetime = 3600",
                "",
            ]
        )
    )
    log_path = workdir / "pgbouncer.log"
    # it refuses to run as root; it reads its files before it drops to nobody
    command = [executable, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(config)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    bouncer = Bouncer(
        pooled_url=make_conninfo(database_url, host="127.0.0.1", port=str(port), user=user),
        direct_url=database_url,
        port=port,
        log_path=log_path,
    )
    try:
        _wait_until_up(bouncer, proc)
        yield bouncer
    finally:
        proc.terminate()
        try:
            proc.wait(HANG_GUARD)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(HANG_GUARD)
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_until_up(bouncer: Bouncer, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"pgbouncer exited ({proc.returncode}):\n{bouncer.log()}")
        try:
            with psycopg.connect(bouncer.pooled_url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
