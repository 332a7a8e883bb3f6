"""The dashboard mounted in a user's FastAPI application under ``/tickwork``, in a real browser
(Debian's chromium, driven by Playwright): signing in, the jobs page, a job's page reached by
a link and by a reload (the refresh cookie, scoped below the prefix, keeps the session), the
event stream opened under the prefix; no console error, no request outside the prefix.

The application is served by uvicorn in a thread of this process; waits are Playwright's own
(each ``expect`` waits for the page to show what it asserts), never a fixed sleep."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from tickwork import App
from tickwork.auth import AuthService, Role
from tickwork.contrib.fastapi import control_plane, lifespan

from .support import browser_missing

pytestmark = pytest.mark.e2e

try:
    import playwright.sync_api as playwright_api
except ImportError:
    browser_missing("playwright is not installed (pip install -e '.[dev]')")

CHROMIUM = os.environ.get("TICKWORK_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery staple"
EMAIL = "ops@example.com"
PREFIX = "/tickwork"
HANG_GUARD = 120.0  # not a timing assertion: only stops a broken start from hanging the run
SHOWN = 20_000  # ms Playwright waits for the page to show something (lists refresh every 3 s)

if not Path(CHROMIUM).exists():
    browser_missing(f"no browser at {CHROMIUM} (apt-get install chromium)")


class _Server(uvicorn.Server):
    """uvicorn without its signal handling (the test's process is not its own), with an
    event set once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def shop(database_url: str, schema: str) -> FastAPI:
    """The user's application: a page of its own, tickwork's control plane under PREFIX."""
    app = App(database_url=database_url, schema=schema)

    @app.task(name="shop.ship", queue="shop")
    def ship(order: int) -> None:  # run by a worker process (none here: the job waits)
        pass

    plane = control_plane(app)
    api = FastAPI(lifespan=lifespan(app, plane))

    @api.get("/")
    async def home() -> dict[str, str]:
        return {"app": "shop"}

    api.mount(PREFIX, plane)
    return api


@pytest.fixture
def served(database_url: str, schema: str, clean: None) -> Iterator[str]:
    """The shop served by uvicorn in a thread, with an operator; its URL."""

    async def user() -> None:
        app = App(database_url=database_url, schema=schema)
        try:
            auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
            await auth.start()
            await auth.create_user(EMAIL, PASSWORD, Role.OPERATOR)
        finally:
            await app.aclose()

    asyncio.run(user())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = _Server(uvicorn.Config(shop(database_url, schema), log_config=None, lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        assert server.listening.wait(HANG_GUARD), "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(HANG_GUARD)
        sock.close()


def test_an_operator_signs_in_and_works_the_jobs_page_under_the_prefix(served: str) -> None:
    expect = playwright_api.expect
    expect.set_options(timeout=SHOWN)
    errors: list[str] = []
    outside: list[str] = []
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_context(base_url=served).new_page()
            page.set_default_timeout(SHOWN)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            def asked(request: Any) -> None:
                path = urlsplit(request.url).path
                if path != PREFIX and not path.startswith(PREFIX + "/"):
                    outside.append(request.url)

            page.on("request", asked)
            page.on(
                "response",
                lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None,
            )

            # the dashboard's root sends a stranger to its own sign-in page, under the prefix
            page.goto(PREFIX + "/")
            expect(page.get_by_role("heading", name="Sign in to tickwork")).to_be_visible()
            assert urlsplit(page.url).path == PREFIX + "/login"
            page.get_by_label("Email").fill(EMAIL)
            page.get_by_label("Password").fill(PASSWORD)
            with page.expect_response(lambda r: r.url == f"{served}{PREFIX}/api/events") as sse:
                page.get_by_role("button", name="Sign in").click()
                expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            assert sse.value.status == 200
            assert urlsplit(page.url).path == PREFIX  # the router's name for its root
            page.reload()  # which the host redirects to PREFIX + "/" (FastAPI's default)
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()

            # the jobs page, and a job enqueued through the API shows up on it
            page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs").click()
            expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
            assert urlsplit(page.url).path == PREFIX + "/jobs"
            job = enqueue(served)
            page.get_by_role("link", name=f"#{job}").click()
            expect(page.get_by_role("heading", name=f"Job #{job}", exact=False)).to_be_visible()
            assert urlsplit(page.url).path == f"{PREFIX}/jobs/{job}"

            # a reload: the page from the server, the session from the refresh cookie
            page.reload()
            expect(page.get_by_role("heading", name=f"Job #{job}", exact=False)).to_be_visible()
            cookies = page.context.cookies()
            refresh = next(c for c in cookies if c["name"] == "tickwork_refresh")
            assert refresh["path"] == PREFIX + "/api/auth" and refresh["httpOnly"]
        finally:
            browser.close()
    assert errors == [], "\n".join(errors)
    assert outside == [], outside


def enqueue(url: str) -> int:
    base = f"{url}{PREFIX}/api"
    login = httpx.post(f"{base}/auth/login", json={"email": EMAIL, "password": PASSWORD})
    assert login.status_code == 200, login.text
    headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
    answer = httpx.post(
        f"{base}/jobs", json={"task": "shop.ship", "args": {"order": 7}}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])
