"""``tickwork serve`` on a port another process listens on: one line, exit code 4, and
nothing started (no worker registered, no administrator created, no lease taken)."""

from __future__ import annotations

import socket
from typing import Any

import psycopg
import pytest

from tickwork.serve import EXIT_CANNOT_LISTEN

from .support import tickwork

pytestmark = pytest.mark.e2e


def test_a_taken_port_is_one_line_and_exit_code_4(db_env: dict[str, str], clean: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = tickwork(db_env, "serve", "--host", "127.0.0.1", "--port", str(port))
    assert done.returncode == EXIT_CANNOT_LISTEN == 4
    assert done.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: address already in use"
    ], done.stderr
    assert done.stdout == ""
    schema = db_env["TICKWORK_SCHEMA"]
    with psycopg.connect(db_env["TICKWORK_DATABASE_URL"]) as conn:
        started: Any = conn.execute(
            f"SELECT (SELECT count(*) FROM {schema}.workers),"
            f" (SELECT count(*) FROM {schema}.users),"
            f" (SELECT count(*) FROM {schema}.leases)"
        ).fetchone()
    assert started == (0, 0, 0)
