"""tickwork's control plane mounted in a user's FastAPI application under ``/tickwork``, served
by a real uvicorn on the test database: the dashboard's page and files, signing in with the
refresh cookie scoped below the prefix, API calls, the API docs, the event stream; started and
stopped by the application's lifespan (503 before). And what the prefix must not open: no
route without its token or role, no cookie honoured from another origin, no path trick past
the gate, no mount path that becomes markup or a cookie attribute."""

# (no "from __future__ import annotations": FastAPI reads the host's handlers' annotations)
import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI

from tickwork import App
from tickwork.api.gate import PUBLIC_BODY_BYTES
from tickwork.api.plane import NOT_STARTED
from tickwork.auth import AuthService, Role
from tickwork.contrib.fastapi import ControlPlane, control_plane, lifespan
from tickwork.serve import _Server as Server  # uvicorn with an event once it listens
from tickwork.web import ASSET_CACHE, CSP

PASSWORD = "correct horse battery staple"
PREFIX = "/tickwork"
HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


def email(role: Role) -> str:
    return f"{role.name.lower()}@example.com"


def host_app(app: App) -> tuple[FastAPI, ControlPlane]:
    """The user's application: routes of its own (one at a path the plane also has, below
    its prefix) and the control plane mounted under PREFIX."""
    plane = control_plane(app)
    api = FastAPI(lifespan=lifespan(app, plane))

    @api.get("/")
    async def home() -> dict[str, str]:
        return {"app": "shop"}

    @api.post("/api/auth/login")
    async def own_login() -> dict[str, str]:
        return {"app": "shop"}

    api.mount(PREFIX, plane)
    return api, plane


@dataclass
class Served:
    url: str
    client: httpx.AsyncClient
    plane: ControlPlane
    tokens: dict[Role, str]

    def headers(self, role: Role) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


@contextlib.asynccontextmanager
async def uvicorn_serving(api: Any) -> AsyncIterator[str]:
    """``api`` served by uvicorn on a port of its own (its lifespan run, as in production)
    until the block ends; the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = Server(uvicorn.Config(api, log_config=None, lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait([listening, task], timeout=HANG_GUARD, return_when="FIRST_COMPLETED")
        assert server.listening.is_set(), "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, HANG_GUARD)
        sock.close()


@pytest.fixture
async def served(app: App) -> AsyncIterator[Served]:
    @app.task(name="ship", queue="shop")
    def ship(order: int) -> None:
        pass

    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    for role in Role:
        await auth.create_user(email(role), PASSWORD, role)
    api, plane = host_app(app)
    async with (
        uvicorn_serving(api) as url,
        httpx.AsyncClient(base_url=url, timeout=HANG_GUARD) as client,
    ):
        tokens = {}
        for role in Role:
            answer = await client.post(
                f"{PREFIX}/api/auth/login", json={"email": email(role), "password": PASSWORD}
            )
            assert answer.status_code == 200, answer.text
            tokens[role] = answer.json()["access_token"]
        yield Served(url, client, plane, tokens)
    assert not plane.started  # the application's shutdown stopped it


async def test_the_dashboard_is_served_under_the_prefix(served: Served) -> None:
    client = served.client
    for path in ("/", "/jobs", "/jobs/42", "/login?next=/jobs"):
        answer = await client.get(PREFIX + path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["cache-control"] == "no-cache"
        assert answer.headers["content-security-policy"] == CSP
        assert '<meta name="tickwork-base" content="/tickwork" />' in answer.text
    page = (await client.get(PREFIX + "/")).text
    assert "./assets/" not in page  # every file named absolutely, under the prefix
    files = re.findall(r'(?:src|href)="(?!data:)([^"]+)"', page)
    assert files and all(f.startswith(PREFIX + "/assets/") for f in files), files
    for path in files:
        answer = await client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["cache-control"] == ASSET_CACHE
    # an API path that is no route is a problem, not the page; the prefix's bare path is
    # the host's, not the plane's
    nope = await client.get(PREFIX + "/api/nope")
    assert nope.status_code == 404 and nope.headers["content-type"].startswith("application/")
    assert (await client.get(PREFIX + "/assets/nope.js")).status_code == 404
    # the host's own routes are untouched, its login included
    assert (await client.get("/")).json() == {"app": "shop"}
    assert (await client.post("/api/auth/login")).json() == {"app": "shop"}
    assert (await client.get("/api/jobs")).status_code == 404


async def test_signing_in_under_the_prefix(served: Served) -> None:
    client = served.client
    answer = await client.post(
        f"{PREFIX}/api/auth/login",
        json={"email": email(Role.OPERATOR), "password": PASSWORD, "cookie": True},
    )
    assert answer.status_code == 200, answer.text
    cookie = answer.headers["set-cookie"]
    assert "tickwork_refresh=" in cookie
    assert "Path=/tickwork/api/auth;" in cookie or cookie.endswith("Path=/tickwork/api/auth")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    access = answer.json()["access_token"]

    me = await client.get(f"{PREFIX}/api/me", headers={"Authorization": f"Bearer {access}"})
    assert me.status_code == 200 and me.json()["email"] == email(Role.OPERATOR)
    enqueued = await client.post(
        f"{PREFIX}/api/jobs",
        json={"task": "ship", "args": {"order": 7}},
        headers={"Authorization": f"Bearer {access}"},
    )
    assert enqueued.status_code == 201, enqueued.text

    # the cookie is sent where the page sends it (the prefixed refresh path) and honoured
    # from this server's own pages only
    refreshed = await client.post(f"{PREFIX}/api/auth/refresh", headers={"Origin": served.url})
    assert refreshed.status_code == 200, refreshed.text
    assert "Path=/tickwork/api/auth" in refreshed.headers["set-cookie"]
    for origin in (None, "https://evil.example", "null", served.url + PREFIX):
        headers = {} if origin is None else {"Origin": origin}
        refused = await client.post(f"{PREFIX}/api/auth/refresh", headers=headers)
        assert refused.status_code == 403, (origin, refused.text)
    out = await client.post(f"{PREFIX}/api/auth/logout", headers={"Origin": served.url})
    assert out.status_code == 204
    assert "Path=/tickwork/api/auth" in out.headers["set-cookie"]
    assert "Max-Age=0" in out.headers["set-cookie"]


async def test_the_api_docs_link_under_the_prefix(served: Served) -> None:
    client = served.client
    document = await client.get(f"{PREFIX}/api/openapi.json")
    assert document.status_code == 200
    assert document.json()["servers"][0] == {"url": PREFIX}  # Swagger UI calls /tickwork/api/...
    docs = await client.get(f"{PREFIX}/api/docs")
    assert docs.status_code == 200
    assert f"'{PREFIX}/api/openapi.json'" in docs.text
    links = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert links and all(link.startswith(f"{PREFIX}/api/docs/assets/") for link in links)
    for link in links:
        assert (await client.get(link)).status_code == 200, link


async def test_the_event_stream_answers_under_the_prefix(served: Served) -> None:
    client = served.client
    assert (await client.get(f"{PREFIX}/api/events")).status_code == 401
    headers = served.headers(Role.VIEWER) | {"Accept": "text/event-stream"}
    async with client.stream("GET", f"{PREFIX}/api/events", headers=headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.aiter_lines()

        async def next_event() -> tuple[str, str]:
            kind = ""
            async for line in lines:
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    return kind, line.removeprefix("data: ")
            raise AssertionError("the stream ended")

        # the listener's first connection is told as a resync: from then on, it listens
        assert await asyncio.wait_for(next_event(), HANG_GUARD) == ("resync", "{}")
        enqueued = await client.post(
            f"{PREFIX}/api/jobs",
            json={"task": "ship", "args": {"order": 8}},
            headers=served.headers(Role.OPERATOR),
        )
        assert enqueued.status_code == 201, enqueued.text
        while (event := await asyncio.wait_for(next_event(), HANG_GUARD))[0] != "jobs":
            pass
        assert event == ("jobs", '{"queues":["shop"]}')


async def test_the_prefix_opens_nothing_without_a_token_or_role(
    served: Served, sql: psycopg.Connection[Any]
) -> None:
    client = served.client
    assert (await client.get(f"{PREFIX}/api/jobs")).status_code == 401
    assert (
        await client.get(f"{PREFIX}/api/me", headers={"Authorization": "Bearer x"})
    ).status_code == 401
    anonymous = await client.post(f"{PREFIX}/api/jobs", json={"task": "ship", "args": {}})
    assert anonymous.status_code == 401  # refused by the gate, before the body is read
    # the gate knows the public routes below the prefix: their smaller body limit holds
    large = b"x" * (PUBLIC_BODY_BYTES + 1)
    assert (await client.post(f"{PREFIX}/api/auth/login", content=large)).status_code == 413
    viewer = await client.post(
        f"{PREFIX}/api/jobs", json={"task": "ship", "args": {}}, headers=served.headers(Role.VIEWER)
    )
    assert viewer.status_code == 403
    users = await client.get(f"{PREFIX}/api/users", headers=served.headers(Role.OPERATOR))
    assert users.status_code == 403
    assert (
        await client.get(f"{PREFIX}/api/users", headers=served.headers(Role.ADMIN))
    ).status_code == 200

    # paths a client sends as written (no dot segments removed, slashes doubled, another
    # case, the prefix glued on): none reaches a route without its check
    port = int(served.url.rsplit(":", 1)[1])
    body = b'{"task": "ship", "args": {}}'
    for path in (
        "/tickwork/api/auth/login/../../jobs",
        "/tickwork/../tickwork/api/jobs",
        "/tickwork//api/jobs",
        "/tickwork/api//jobs",
        "/tickwork/api/jobs/",
        "/TICKWORK/api/jobs",
        "/tickworkapi/jobs",
        "/tickwork/api%2Fjobs",
        "/tickwork/%61pi/jobs",
    ):
        status = await raw_post(port, path, body)
        assert status in (401, 404, 405), (path, status)
    assert sql.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


async def raw_post(port: int, path: str, body: bytes) -> int:
    """POST ``body`` to ``path`` exactly as written (httpx would tidy the path): the status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), HANG_GUARD)
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_a_control_plane_not_started_answers_503(app: App) -> None:
    """A host that mounts the plane but leaves it out of its lifespan: every request is
    refused, saying what to do, and nothing is served unchecked meanwhile."""
    plane = control_plane(app)
    api = FastAPI(lifespan=lifespan(app))  # the plane left out
    api.mount(PREFIX, plane)
    transport = httpx.ASGITransport(app=api)
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        for method, path in (("GET", "/"), ("GET", "/api/jobs"), ("POST", "/api/auth/login")):
            answer = await client.request(method, PREFIX + path)
            assert answer.status_code == 503, path
            assert answer.json()["detail"] == NOT_STARTED


async def test_a_hostile_mount_path_stays_a_path(app: App) -> None:
    """A mount path with a parameter (``/{tenant}``) puts the client's text in root_path:
    it is percent-encoded wherever it is written (the page, the docs' script, the cookie's
    Path), never markup, script or a cookie attribute."""
    plane = control_plane(app)
    api = FastAPI(lifespan=lifespan(app, plane))
    api.mount("/{tenant}", plane)
    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    await auth.create_user(email(Role.VIEWER), PASSWORD, Role.VIEWER)
    transport = httpx.ASGITransport(app=api)
    hostile = "/x\"'><script>alert(1)<\\script>;Domain=evil.example"
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        page = await client.get(hostile + "/")
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "'>" not in page.text
        assert (
            'content="/x%22%27%3E%3Cscript%3Ealert%281%29%3C%5Cscript%3E%3BDomain%3Devil.example"'
            in page.text
        )
        docs = await client.get(hostile + "/api/docs")
        assert "<script>alert" not in docs.text and "x\"'" not in docs.text
        login = await client.post(
            hostile + "/api/auth/login",
            json={"email": email(Role.VIEWER), "password": PASSWORD, "cookie": True},
        )
        assert login.status_code == 200, login.text
        cookie = login.headers["set-cookie"]
        assert "Domain=" not in cookie and "%3BDomain%3Devil.example/api/auth" in cookie


async def test_the_control_plane_runs_its_own_lifespan_when_served_alone(app: App) -> None:
    """Served on its own (``uvicorn module:plane``), the plane starts and stops with the
    server, and closes the app's pools."""
    plane = control_plane(app)
    async with uvicorn_serving(plane) as url, httpx.AsyncClient(base_url=url) as client:
        assert plane.started
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/api/jobs")).status_code == 401
    assert not plane.started
