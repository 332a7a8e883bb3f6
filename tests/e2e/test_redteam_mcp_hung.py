"""Red team, round two: ``/mcp`` on a serve whose PostgreSQL is stopped (SIGSTOP of the
postmaster and its backends). The REST API answers 503 within its request deadline
(test_hung_database_serve); an MCP request checks its API token against the database before
any tool runs, outside the REST API's deadline, so it must be bounded too."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx

from ..integration.test_hung_database import SCHEMA, assert_503
from ..net import pgserver
from .support import HANG_GUARD, serving
from .test_hung_database_serve import ADMIN, DEADLINE, PASSWORD, own_server

__all__ = ["own_server"]  # the fixture, used by name

REQUESTS = 4
LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_mcp_requests_answer_503_while_the_database_is_stopped(
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
    roles = ("--roles", "api,mcp", "--log-level", "ERROR")
    with serving(env, tmp_path, *roles) as (_, url, _):
        login = httpx.post(f"{url}/api/auth/login", json={"email": ADMIN, "password": PASSWORD})
        session = {"Authorization": f"Bearer {login.json()['access_token']}"}
        made = httpx.post(f"{url}/api/me/tokens", json={"name": "assistant"}, headers=session)
        assert made.status_code == 201, made.text
        bearer = {"Authorization": f"Bearer {made.json()['token']}"} | ACCEPT
        assert httpx.post(f"{url}/mcp", json=LISTING, headers=bearer).status_code == 200

        async def send_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=None) as client:
                sent = [
                    client.post(f"{url}/mcp", json=LISTING, headers=bearer) for _ in range(REQUESTS)
                ]
                return await asyncio.wait_for(asyncio.gather(*sent), HANG_GUARD)

        with pgserver.stopped(own_server):
            answers = asyncio.run(send_all())
        for answer in answers:
            assert_503(answer)

        deadline = time.monotonic() + HANG_GUARD  # the server goes on: MCP serves again
        while httpx.post(f"{url}/mcp", json=LISTING, headers=bearer).status_code != 200:
            assert time.monotonic() < deadline, "MCP did not serve again"
