"""A signal processor killed with SIGKILL in the middle of a reactor: another process takes
SIGNAL_MASTER, finds the signal left PROCESSING, and finishes it without running the reactor
that had already completed."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from .support import HANG_GUARD, spawner, wait_for

pytestmark = pytest.mark.e2e
HERE = Path(__file__).parent


@pytest.fixture
def spawn(db_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    env = dict(
        db_env,
        PYTHONPATH=str(HERE),
        TICKWORK_SIGNALS__LEASE__HEARTBEAT="0.3",
        TICKWORK_SIGNALS__LEASE__TTL="1.5",
        TICKWORK_SIGNALS__PROCESSOR__POLL_INTERVAL="0.1",
        TICKWORK_SIGNALS__PROCESSOR__STUCK_AFTER="1",
        TICKWORK_SIGNALS__REACTORS='{"a": {"enabled": true}, "b": {"enabled": true}}',
        TICKWORK_SIGNALS__DEBOUNCE='{"CRASH_TEST": 0}',
    )
    args = ("serve", "--app", "signal_crash_app:app", "--roles", "signals", "--log-level", "INFO")
    with spawner(env, tmp_path, *args) as spawn:
        yield spawn


def test_killed_processor_mid_reactor_is_recovered_once(
    spawn: Any, sql: psycopg.Connection[Any], db_env: dict[str, str], clean: None
) -> None:
    sql.execute("CREATE TABLE IF NOT EXISTS crash_log (reactor text, signal_id bigint, pid int)")
    sql.execute("TRUNCATE crash_log")
    from tickwork import App

    emitter = App(
        database_url=db_env["TICKWORK_DATABASE_URL"],
        schema=db_env["TICKWORK_SCHEMA"],
        signals={"debounce": {"CRASH_TEST": 0}},
    )
    emitted = emitter.signals.emit("CRASH_TEST", "Thing", 1)
    emitter.close()

    first = spawn("first", BLOCK_B="1")

    def started() -> Any:
        return sql.execute("SELECT pid FROM crash_log WHERE reactor = 'b-started'").fetchone()

    assert wait_for(started, "reactor b to start in the first process")[0] == first.pid
    # a completed before b started: its row committed with its COMPLETED delivery
    assert sql.execute("SELECT reactor, pid FROM crash_log WHERE reactor = 'a'").fetchall() == [
        ("a", first.pid)
    ]
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    (status,) = sql.execute("SELECT status FROM signals").fetchone() or ("?",)
    assert status == "PROCESSING"  # left behind by the dead processor

    second = spawn("second")

    def settled() -> Any:
        return sql.execute("SELECT status FROM signals WHERE status = 'COMPLETED'").fetchone()

    wait_for(settled, "the second process to recover and complete the signal")
    rows = sql.execute("SELECT reactor, pid FROM crash_log ORDER BY reactor").fetchall()
    assert rows == [("a", first.pid), ("b", second.pid), ("b-started", first.pid)]
    deliveries = sql.execute(
        "SELECT reactor_name, status FROM signal_reactor_status WHERE signal_id = %s"
        " ORDER BY reactor_name",
        [emitted.signal_id],
    ).fetchall()
    assert deliveries == [("a", "COMPLETED"), ("b", "COMPLETED")]
    (retries,) = sql.execute("SELECT retry_count FROM signals").fetchone() or (None,)
    assert retries == 1  # one recovery counted
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=HANG_GUARD) == 0
