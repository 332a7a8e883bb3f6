"""A real ``tickwork serve`` whose PostgreSQL (a server of the test's own) is stopped with
SIGSTOP, postmaster and backends: every request sent at once answers a 503 problem (the
request deadline), and once the server goes on the API serves on clean connections.

Without the deadline the red team saw 4 of 12 requests hang >= 90 s and 3 of 12 >= 200 s;
this test's guard would fail on them."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tickwork import App

from ..figures import record
from ..integration.test_hung_database import REQUESTS, SCHEMA, assert_503
from ..net import pgserver
from .support import HANG_GUARD, free_port, serving

DEADLINE = 2.0
ADMIN = "admin@example.com"
PASSWORD = "correct horse battery staple"


@pytest.fixture
def own_server() -> Iterator[pgserver.Server]:
    """A PostgreSQL of this test's own (never the shared one: it is stopped)."""
    server = pgserver.start("127.0.0.1", "127.0.0.1/32", free_port())
    try:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE tickwork")
        App(database_url=server.url("tickwork"), schema=SCHEMA).migrate()
        yield server
    finally:
        server.stop()


def test_a_serve_answers_every_request_while_its_database_is_stopped(
    own_server: pgserver.Server, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")} | {
        "TICKWORK_DATABASE_URL": own_server.url("tickwork"),
        "TICKWORK_SCHEMA": SCHEMA,
        "TICKWORK_RUNTIMES__SERVE": "[]",
        "TICKWORK_POOL_MIN_SIZE": "4",
        "TICKWORK_API__REQUEST_DEADLINE": str(DEADLINE),
        "TICKWORK_API__DATABASE_WAIT": "1",
        "TICKWORK_ADMIN_EMAIL": ADMIN,
        "TICKWORK_ADMIN_PASSWORD": PASSWORD,
    }
    with serving(env, tmp_path, "--roles", "api", "--log-level", "ERROR") as (_, url, _):
        login = httpx.post(f"{url}/api/auth/login", json={"email": ADMIN, "password": PASSWORD})
        assert login.status_code == 200, login.text
        headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        assert httpx.get(f"{url}/api/jobs", headers=headers).status_code == 200

        async def send_all() -> list[tuple[httpx.Response, float]]:
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as client:

                async def one(path: str) -> tuple[httpx.Response, float]:
                    started = time.monotonic()
                    answer = await client.get(path)
                    return answer, time.monotonic() - started

                paths = ["/api/jobs", "/api/queues", "/api/schedules"]
                return await asyncio.wait_for(
                    asyncio.gather(*(one(paths[n % len(paths)]) for n in range(REQUESTS))),
                    HANG_GUARD,
                )

        with pgserver.stopped(own_server):
            answers = asyncio.run(send_all())
        for answer, _ in answers:
            assert_503(answer)
        record(
            "reliability",
            "a serve with its database server stopped (SIGSTOP of postmaster and backends)",
            f"requests answered 503 of {REQUESTS} sent at once",
            len(answers),
            request_deadline=DEADLINE,
            slowest_seconds=round(max(took for _, took in answers), 2),
        )

        # the server goes on: the API serves again, every answer on a clean connection
        deadline = time.monotonic() + HANG_GUARD
        while httpx.get(f"{url}/api/jobs", headers=headers).status_code != 200:
            assert time.monotonic() < deadline, "the API did not serve again"
        for _ in range(2 * REQUESTS):
            answer = httpx.get(f"{url}/api/jobs", headers=headers)
            assert answer.status_code == 200, answer.text
