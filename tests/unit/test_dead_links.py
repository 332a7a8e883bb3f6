"""What tickwork does about a database link that went dead without a reset: TCP settings on
every connection (the URL's own win), and a worker that stops its handlers by its own clock
when its renewals cannot get through. tests/net/ shows both with real cut links."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast
from uuid import uuid4

import pytest
from pydantic import ValidationError

from tickwork.config import Settings
from tickwork.db.database import Database
from tickwork.db.store import Store
from tickwork.types import Job
from tickwork.worker.attempt import Attempt
from tickwork.worker.renewer import Renewer

URL = "postgresql://db.example:5432/tickwork"
HANG_GUARD = 30.0  # not a timing assertion: only stops a broken test from hanging


def test_connections_carry_keepalives_and_a_user_timeout_by_default() -> None:
    kwargs = Database(Settings(database_url=URL)).connection_kwargs(URL)
    assert kwargs["keepalives"] == 1
    assert kwargs["keepalives_idle"] == 5
    assert kwargs["keepalives_interval"] == 2
    assert kwargs["keepalives_count"] == 3
    assert kwargs["tcp_user_timeout"] == 15_000
    assert kwargs["connect_timeout"] == 10
    # and the server is asked to treat tickwork's sessions the same way
    assert kwargs["options"].split() == [
        *("-c", "tcp_user_timeout=15000", "-c", "tcp_keepalives_idle=5"),
        *("-c", "tcp_keepalives_interval=2", "-c", "tcp_keepalives_count=3"),
    ]


def test_tcp_settings_are_overridable_and_the_urls_own_parameters_win() -> None:
    url = f"{URL}?keepalives_idle=60&tcp_user_timeout=0"
    settings = Settings(
        database_url=url, tcp={"keepalives_interval": 7, "user_timeout": 2.5, "keepalives": False}
    )
    kwargs = Database(settings).connection_kwargs(url)
    assert "keepalives_idle" not in kwargs and "tcp_user_timeout" not in kwargs  # the URL's
    assert kwargs["keepalives_interval"] == 7
    assert kwargs["keepalives"] == 0
    assert Database(settings).tcp_kwargs(URL)["tcp_user_timeout"] == 2500
    # the URL's own options come after tickwork's server-side defaults, so they win
    given = f"{URL}?options=-c%20tcp_user_timeout%3D1"
    options = Database(Settings(database_url=given)).connection_kwargs(given)["options"]
    assert options.endswith("-c tcp_user_timeout=1")
    off = Settings(database_url=URL, tcp={"server_side": False})
    assert "options" not in Database(off).connection_kwargs(URL)


def test_a_bad_tcp_setting_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError, match="keepalives_idle"):
        Settings(tcp={"keepalives_idle": 0})


async def test_an_attempt_is_interrupted_by_its_own_deadline_while_renewals_hang() -> None:
    dead_link = asyncio.Event()  # never set: every statement hangs, as on a silent partition

    async def pooled(call: Any) -> Any:
        await dead_link.wait()

    inflight: dict[int, Attempt] = {}
    renewer = Renewer(
        pooled,
        cast(Store, None),
        inflight,
        worker_id=uuid4(),
        record=lambda: ([], "{}"),
        lease_ttl=0.5,
        interval=0.1,
    )
    attempt = Attempt(cast(Job, SimpleNamespace(id=1)), execution_id=1, is_async=True)
    attempt.lease_until = renewer.lease_until(time.monotonic())
    interrupted = asyncio.Event()

    async def handler() -> None:
        attempt.in_handler = True
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            interrupted.set()
            raise

    attempt.runner = asyncio.create_task(handler())
    inflight[1] = attempt
    stop = asyncio.Event()
    renewing = asyncio.create_task(renewer.run(stop))
    try:
        await asyncio.wait_for(interrupted.wait(), HANG_GUARD)
    finally:
        stop.set()
        renewing.cancel()
        await asyncio.gather(renewing, attempt.runner, return_exceptions=True)
    assert attempt.interrupted_for == "lease_expired"
