"""The API while the database is out of reach, through a real TCP proxy the test cuts.

Every answer during an outage is a 503 problem (never a 500, never text/plain) with a
Retry-After; an enqueue says nothing was stored; once the database is back (or a killed
connection replaced) the API serves again without a restart. The CLI, for its part, says
so in one line (exit 2, no traceback, no password).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tickwork import App
from tickwork.api import create_api
from tickwork.auth import AuthService, Role
from tickwork.auth.sessions import SessionCache

from ..figures import record
from .api_support import BASE_URL, PASSWORD, Api, email
from .tcp_proxy import TcpProxy, tcp_target, through

HANG_GUARD = 60.0
"""Not a timing assertion: only stops a broken test from hanging."""
REQUEST_WAIT = 1.0
"""Seconds a request of the proxied API waits for a pooled connection."""
PROBLEM = "application/problem+json"
TASK = "tests.outage.echo"
CANARY = "canary-secret"
GIVEN_UP = "reconnection attempt in pool"
"""How psycopg_pool's warning that it gave up reconnecting (after reconnect_timeout) starts."""


@pytest.fixture
async def proxy(tcp_database_url: str) -> AsyncIterator[TcpProxy]:
    target = tcp_target(tcp_database_url)
    assert target is not None, tcp_database_url
    found = TcpProxy(*target)
    await found.start()
    yield found
    await found.aclose()


@pytest.fixture
async def proxied(
    tcp_database_url: str, schema: str, clean: None, proxy: TcpProxy
) -> AsyncIterator[App]:
    """An App whose every connection goes through the proxy."""
    the_app = App(database_url=through(tcp_database_url, proxy.port), schema=schema)

    @the_app.task(name=TASK, queue="outage")
    def echo(word: str = "hi") -> str:
        return word

    yield the_app
    await the_app.aclose()


@pytest.fixture
async def api(proxied: App) -> AsyncIterator[Api]:
    """The API on the proxied App (pool wait: :data:`REQUEST_WAIT`), an OPERATOR logged in.

    The client hands a 500 back as an answer (``raise_app_exceptions=False``) rather than
    raising the app's exception, so an assertion shows what a caller would get."""
    pool = await proxied.db.async_pool(timeout=REQUEST_WAIT)
    auth = AuthService(pool, proxied.db.store, proxied.settings.auth)
    await auth.start()
    the_api = create_api(proxied, auth, pool)
    transport = httpx.ASGITransport(app=the_api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        found = Api(proxied, the_api, auth, client)
        await auth.create_user(email(Role.OPERATOR), PASSWORD, Role.OPERATOR)
        answer = await found.login(email(Role.OPERATOR))
        assert answer.status_code == 200, answer.text
        found.tokens[Role.OPERATOR] = answer.json()["access_token"]
        yield found


def pool_of(api: Api) -> Any:
    return api.api.state.services.pool


def assert_unavailable(answer: httpx.Response) -> dict[str, Any]:
    """A 503 problem saying the database is out of reach, with a Retry-After; its body."""
    what = f"{answer.request.method} {answer.request.url.path}"
    assert answer.status_code == 503, f"{what}: {answer.status_code} {answer.text}"
    assert answer.headers["content-type"].startswith(PROBLEM), f"{what}: {answer.headers}"
    body: dict[str, Any] = answer.json()
    assert body["status"] == 503, body
    assert body["title"] == "Database unavailable", body
    assert body["detail"], body
    retry_after = answer.headers.get("retry-after", "")
    assert retry_after.isdigit() and int(retry_after) >= 1, f"{what}: {answer.headers}"
    return body


def assert_served_or_unavailable(answer: httpx.Response) -> bool:
    """True for a 2xx; a 503 problem is the only other answer allowed (never a 500)."""
    if answer.is_success:
        return True
    assert_unavailable(answer)
    return False


async def list_jobs(api: Api) -> httpx.Response:
    return await api.client.get("/api/jobs", headers=api.headers(Role.OPERATOR))


async def enqueue(api: Api, word: str) -> httpx.Response:
    return await api.client.post(
        "/api/jobs",
        headers=api.headers(Role.OPERATOR),
        json={"task": TASK, "args": {"word": word}},
    )


async def first_success(probe: Callable[[], Awaitable[httpx.Response]]) -> tuple[int, float]:
    """Ask ``probe`` until it answers 2xx (each failure a 503 problem); (failures, seconds)."""

    async def loop() -> int:
        failures = 0
        while not assert_served_or_unavailable(await probe()):
            failures += 1
        return failures

    started = time.monotonic()
    failures = await asyncio.wait_for(loop(), HANG_GUARD)
    return failures, time.monotonic() - started


def jobs_in_database(database_url: str, schema: str) -> list[tuple[int, str, Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT id, task, args FROM {schema}.jobs ORDER BY id").fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


# -- the cut ---------------------------------------------------------------------------------


async def test_cut_answers_503_problems(api: Api, proxy: TcpProxy, database_url: str) -> None:
    assert (await api.client.get("/readyz")).status_code == 200
    assert (await list_jobs(api)).status_code == 200
    pool = pool_of(api)
    assert pool.get_stats().get("pool_available", 0) >= 1, "no idle connection to go dead"
    pool.pop_stats()

    await proxy.cut()

    # the first request is handed a pooled connection that died with the cut
    assert_unavailable(await list_jobs(api))
    stats = pool.get_stats()
    assert stats.get("requests_errors", 0) == 0, f"it waited for a connection instead: {stats}"
    assert stats.get("returns_bad", 0) + stats.get("connections_lost", 0) >= 1, stats

    # the ones after it find no connection at all (new ones are refused)
    took: dict[str, float] = {}
    for name, request in (
        ("/readyz", lambda: api.client.get("/readyz")),
        ("GET /api/jobs", lambda: list_jobs(api)),
        ("POST /api/jobs", lambda: enqueue(api, "during the cut")),  # "stored": see below
    ):
        started = time.monotonic()
        assert_unavailable(await request())
        took[name] = time.monotonic() - started
    for name, seconds in took.items():
        record(
            "reliability",
            "the API with every database connection cut, then restored",
            f"seconds to a 503 during the cut: {name}",
            round(seconds, 2),
            database_wait=pool_of(api).timeout,
        )
    assert (await api.client.get("/healthz")).status_code == 200  # the process itself is up
    # those did not wait out the pool: a refused connect refused them at once
    assert pool.reach.refused >= 1, pool.get_stats()

    assert jobs_in_database(database_url, api.app.settings.schema_name) == []


@pytest.mark.parametrize("first", [True, False], ids=["dead-connection", "no-connection"])
async def test_enqueue_during_a_cut_says_not_stored(
    api: Api, proxy: TcpProxy, database_url: str, first: bool
) -> None:
    """The enqueue route itself meets the outage: on the dead pooled connection (the first
    request after the cut) or waiting out the pool (a later one). Its caller's session
    check is kept from the database (answers cached for the whole test), so the failure is
    the route's own."""
    api.auth._sessions = SessionCache(ttl=3600.0)
    assert (await list_jobs(api)).status_code == 200  # the session check, cached from here
    await proxy.cut()
    if not first:
        assert_unavailable(await list_jobs(api))  # takes the dead connection
    body = assert_unavailable(await enqueue(api, "during the cut"))
    assert body.get("stored") == "no", body
    assert jobs_in_database(database_url, api.app.settings.schema_name) == []


async def test_enqueue_refused_at_the_session_check_says_not_stored(
    api: Api, proxy: TcpProxy
) -> None:
    """(That this answer is a 503 problem and stored nothing, test_cut_answers_503_problems
    shows: its enqueue meets the outage in the session check too.)"""
    assert (await list_jobs(api)).status_code == 200
    await proxy.cut()
    api.auth._sessions.clear()  # as a second after the last check: the next one asks the database
    answer = await enqueue(api, "during the cut")
    assert answer.status_code == 503, answer.text
    assert answer.json().get("stored") == "no", answer.json()


# -- the way back ----------------------------------------------------------------------------


@pytest.mark.parametrize("outage", ["short", "past the pool's reconnect timeout"])
async def test_serves_again_after_restore(
    api: Api,
    proxy: TcpProxy,
    database_url: str,
    schema: str,
    outage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg.pool")
    assert (await list_jobs(api)).status_code == 200
    await proxy.cut()
    assert_unavailable(await list_jobs(api))
    assert_unavailable(await api.client.get("/readyz"))
    probes = 0
    if outage != "short":
        # requests keep coming until the pool has given up a reconnection attempt

        async def until_given_up() -> int:
            n = 0
            while not any(GIVEN_UP in r.getMessage() for r in caplog.records):
                assert_unavailable(await api.client.get("/readyz"))
                n += 1
            return n

        probes = await asyncio.wait_for(until_given_up(), HANG_GUARD)

    await proxy.restore()
    failures, seconds = await first_success(lambda: api.client.get("/readyz"))
    print(
        f"\n[outage: {outage}; {probes} probes during it] /readyz answered 200 "
        f"{seconds:.2f} s after the restore, after {failures} 503 answers"
    )
    record(
        "reliability",
        "the API with every database connection cut, then restored",
        f"seconds from restore to /readyz 200 ({outage} outage)",
        round(seconds, 2),
        answers_503_before=failures,
    )

    answer = await enqueue(api, "after the restore")
    assert answer.status_code == 201, answer.text
    job = answer.json()
    read = await api.client.get(f"/api/jobs/{job['id']}", headers=api.headers(Role.OPERATOR))
    assert read.status_code == 200, read.text
    assert read.json()["task"] == TASK
    assert read.json()["args"] == {"word": "after the restore"}
    listed = await list_jobs(api)
    assert listed.status_code == 200, listed.text
    assert [j["id"] for j in listed.json()["items"]] == [job["id"]]
    assert jobs_in_database(database_url, schema) == [
        (job["id"], TASK, {"word": "after the restore"})
    ]


# -- connections killed under the API --------------------------------------------------------


async def _terminate_backends(proxy: TcpProxy, database_url: str) -> None:
    """The server ends every backend serving a proxied connection."""
    ends = proxy.upstream_ends()
    assert ends, "no proxied connection to end"
    with psycopg.connect(database_url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE (host(client_addr), client_port)"
            "  IN (SELECT * FROM unnest(%s::text[], %s::int[]))",
            [[host for host, _ in ends], [port for _, port in ends]],
        ).fetchone()
    assert ended is not None and ended[0] >= 1, f"no backend of {ends} ended"


async def _blip(proxy: TcpProxy, database_url: str) -> None:
    """Every proxied connection reset, new ones accepted again at once."""
    await proxy.cut()
    await proxy.restore()


@pytest.mark.parametrize("kill", [_terminate_backends, _blip], ids=["terminated", "blip"])
async def test_connections_killed_under_the_api(
    api: Api,
    proxy: TcpProxy,
    database_url: str,
    kill: Callable[[TcpProxy, str], Awaitable[None]],
) -> None:
    assert (await list_jobs(api)).status_code == 200
    assert (await api.client.get("/readyz")).status_code == 200
    await kill(proxy, database_url)

    answers: list[int] = []

    async def probe() -> httpx.Response:
        answer = await list_jobs(api)
        answers.append(answer.status_code)
        assert len(answers) <= 10, f"still no 200 after 10 requests: {answers}"
        return answer

    failures, seconds = await first_success(probe)
    print(
        f"\n[{kill.__name__.strip('_')}] answers {answers}: "
        f"200 after {failures} 503 answers, {seconds:.2f} s"
    )
    assert answers[0] == 503, f"the first request did not meet a dead connection: {answers}"
    record(
        "reliability",
        "the API's connections killed under it",
        f"answers before a 200 ({kill.__name__.strip('_').replace('_', ' ')})",
        failures,
        seconds=round(seconds, 2),
        answers_500=answers.count(500),
    )
    assert (await api.client.get("/readyz")).status_code == 200
    answer = await enqueue(api, "after the kill")
    assert answer.status_code == 201, answer.text


# -- the command line ------------------------------------------------------------------------


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port that refuses connections: bound but not listening, so nothing else can take
    it while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def tickwork(command: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "PG"))}
    env["TICKWORK_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "tickwork", command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


@pytest.mark.parametrize(
    ("command", "url"),
    [
        ("doctor", f"postgresql://user:{CANARY}@127.0.0.1:{{port}}/x"),
        ("doctor", f"postgresq://user:{CANARY}@127.0.0.1/x"),
        ("worker", f"postgresq://user:{CANARY}@127.0.0.1/x"),
    ],
    ids=["doctor-closed-port", "doctor-bad-scheme", "worker-bad-scheme"],
)
def test_cli_says_so_in_one_line(command: str, url: str, tmp_path: Path) -> None:
    with closed_port() as port:
        done = tickwork(command, url.format(port=port), tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    for output in (done.stdout, done.stderr):
        assert "Traceback" not in output
        assert CANARY not in output


async def test_the_mcp_endpoint_answers_503_while_the_database_is_away(
    api: Api, proxy: TcpProxy
) -> None:
    """A token cannot be checked without the database: /mcp says the database is away
    (503, Retry-After), not that the token is bad (401) nor a crash (500)."""
    from tickwork.mcp.server import http_endpoint

    owner = await api.auth.create_user("assistant@example.com", PASSWORD, Role.VIEWER)
    _, token = await api.auth.create_api_token(owner.id, "assistant", Role.VIEWER, None)
    endpoint = http_endpoint(api.app.settings, api.auth, api.api, None)
    transport = httpx.ASGITransport(app=endpoint, raise_app_exceptions=False)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with (
        endpoint.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client,
    ):
        assert (await client.post("/mcp", json=listing, headers=headers)).status_code == 200
        await proxy.cut()
        assert_unavailable(await client.post("/mcp", json=listing, headers=headers))
        await proxy.restore()
