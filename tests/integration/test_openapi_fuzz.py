"""The API against its own OpenAPI document: Schemathesis generates requests for every
operation (valid and invalid ones) as an ADMIN, and every response must be a non-5xx answer
whose status, content type, headers and body the document declares; an operation that
declares the bearer scheme must refuse a request without it.

This is the run docs/api.md describes for the CLI, made repeatable: a fixed seed, a few
examples per operation, the same checks. The API is served by uvicorn on a free port in a
thread of its own, with its own event loop: the Schemathesis engine makes blocking HTTP calls,
so the API cannot share the test's loop. The inputs that gave 500s before the API refused
them are pinned below as well, since random generation reaches some only now and then.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import schemathesis
import uvicorn
from schemathesis.engine import from_schema
from schemathesis.engine.events import FatalError, NonFatalError, ScenarioFinished

from tickwork import App
from tickwork.auth import Role

from .api_support import Api, start_api

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "ignored_auth",
)
SEED = 20_260_301
EXAMPLES = 25
"""Per operation in the fuzzing and stateful phases (the coverage phase always tries every
edge: huge integers, NUL characters, bad dates); the run takes about 20 s."""
HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


class _Server(uvicorn.Server):
    """uvicorn telling a waiting thread when it listens (no polling, no sleeps)."""

    def __init__(self, config: uvicorn.Config, listening: threading.Event) -> None:
        super().__init__(config)
        self.listening = listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


class ServedApi:
    """The API of ``app`` (with one user per role, as in api_support) on 127.0.0.1."""

    def __init__(self, app: App) -> None:
        self.app = app
        # IPPROTO_TCP spelled out: asyncio only sets TCP_NODELAY on connections of a socket
        # that says it is TCP (create_server's says 0), and without it every keep-alive
        # request waits 40 ms for a delayed ACK.
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.admin_token = ""
        self.listening = threading.Event()
        self.server: _Server | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="api-under-fuzz", daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self.listening.wait(HANG_GUARD), "the API did not start listening"
        assert self.error is None and self.server is not None and self.server.started, self.error

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(HANG_GUARD)
        assert not self._thread.is_alive(), "the API did not stop"
        self.socket.close()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self.error = exc
        finally:
            self.listening.set()  # wakes start() when start-up failed, too

    async def _serve(self) -> None:
        # a process holding the signal leases, as in production: the signal switches have a
        # holder to apply to (with none they answer 503, which the checks count as a failure)
        signals = self.app.signal_runtime(await self.app.db.async_pool(), holder_id="fuzz-holder")
        await signals.leases.run_once()
        stop_heartbeat = asyncio.Event()
        heartbeat = asyncio.create_task(signals.leases.run(stop_heartbeat))
        served = start_api(self.app, signals)
        api = await anext(served)
        self.admin_token = api.tokens[Role.ADMIN]
        config = uvicorn.Config(api.api, log_level="warning", lifespan="off")
        self.server = _Server(config, self.listening)
        try:
            await self.server.serve(sockets=[self.socket])
        finally:
            stop_heartbeat.set()
            await heartbeat
            await served.aclose()
            await self.app.aclose()  # this loop's pool; the fixture closes the test loop's


def fuzz(url: str, token: str) -> tuple[list[str], int]:
    """Run Schemathesis's coverage, fuzzing and stateful phases against ``url``: the failures
    found (one line each, with a curl command to reproduce it) and the scenarios run."""
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "headers": {"Authorization": f"Bearer {token}"},
            "workers": 1,
            "checks": {"enabled": False} | {name: {"enabled": True} for name in CHECKS},
            "generation": {"max-examples": EXAMPLES, "database": "none"},
        }
    )
    schema = schemathesis.openapi.from_url(f"{url}/api/openapi.json", config=config)
    failures: dict[str, None] = {}  # ordered and without repeats
    scenarios = 0
    for event in from_schema(schema).execute():
        if isinstance(event, ScenarioFinished):
            scenarios += 1
            for nodes in event.recorder.checks.values():
                for node in nodes:
                    if node.failure_info is not None:
                        failure = node.failure_info.failure
                        line = f"{failure.operation}: {failure.title}: {failure.message}"
                        failures[f"{line}\n    {node.failure_info.code_sample}"] = None
        elif isinstance(event, NonFatalError):
            failures[f"{event.label}: error: {event.value!r}"] = None
        elif isinstance(event, FatalError):
            failures[f"Schemathesis failed: {event.exception!r}"] = None
    return list(failures), scenarios


def register_echo(app: App) -> None:
    """A task, so that enqueueing through the API can succeed."""

    @app.task(name="tests.echo", queue="api-tests")
    def echo(word: str = "hi") -> str:
        return word


async def test_every_response_matches_the_openapi_document(app: App) -> None:
    register_echo(app)
    served = ServedApi(app)
    await asyncio.to_thread(served.start)
    try:
        failures, scenarios = await asyncio.to_thread(fuzz, served.url, served.admin_token)
    finally:
        await asyncio.to_thread(served.stop)
    assert served.error is None, served.error
    assert scenarios > 0, "Schemathesis ran nothing"
    assert not failures, "\n".join(failures)


# -- the edges the fuzzer found, pinned (random generation reaches some only now and then) --

BEYOND_BIGINT = 2**63
EDGES: list[tuple[str, str, dict[str, Any], int, str]] = [
    ("POST", f"/api/jobs/{BEYOND_BIGINT}/cancel", {}, 400, "job_id"),
    ("DELETE", f"/api/invites/{BEYOND_BIGINT}", {}, 400, "invite_id"),
    ("GET", "/api/jobs", {"params": {"before_id": BEYOND_BIGINT}}, 400, "before_id"),
    ("GET", "/api/jobs", {"params": {"task": "a\x00"}}, 400, "task"),
    ("GET", "/api/audit", {"params": {"actor": "a\x00"}}, 400, "actor"),
    ("GET", "/api/schedules/a%00b", {}, 400, "name"),
    ("DELETE", "/api/variables/a%00b", {}, 400, "name"),
    ("POST", "/api/jobs", {"json": {"task": "tests.echo", "args": {"word": "a\x00"}}}, 400, "args"),
    ("POST", "/api/jobs/bulk/cancel", {"json": {"task": "a\x00"}}, 400, "task"),
    (
        "POST",
        "/api/schedules",
        {"json": {"name": "a\x00", "task": "t", "cron": "* * * * *"}},
        400,
        "name",
    ),
    ("PUT", "/api/variables/v", {"content": '{"value": "a\\ud800"}'}, 400, "value"),
    (
        "POST",
        "/api/auth/login",
        {"json": {"email": "a\x00@example.com", "password": "x"}},
        400,
        "email",
    ),
    ("POST", "/api/me/tokens", {"json": {"name": "t", "expires_in": 1e300}}, 400, "expires_in"),
    ("GET", "/api/admin/signals/stuck", {"params": {"older_than": "1e300"}}, 400, "older_than"),
    # a time that exists with its offset but not in UTC: stored, it could never be read back
    (
        "POST",
        "/api/jobs",
        {"json": {"task": "tests.echo", "run_at": "0001-01-01T00:00:00+14:00"}},
        400,
        "run_at",
    ),
    # Python's JSON parser takes Infinity and NaN, PostgreSQL's jsonb does not
    (
        "PUT",
        "/api/settings/retention.finished_after",
        {"content": '{"value": Infinity}'},
        400,
        "retention.finished_after",
    ),
    (
        "PUT",
        "/api/settings/retention.finished_after",
        {"content": '{"value": 1e300}'},
        400,
        "retention.finished_after",
    ),
]


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    register_echo(app)
    async for found in start_api(app):
        yield found


async def test_input_the_database_cannot_hold_is_a_problem_naming_the_field(api: Api) -> None:
    headers = api.headers(Role.ADMIN) | {"content-type": "application/json"}
    wrong = []
    for method, path, request, status, field in EDGES:
        answer = await api.client.request(method, path, headers=headers, **request)
        problem = answer.headers["content-type"].startswith("application/problem+json")
        if answer.status_code != status or not problem or answer.json().get("field") != field:
            wrong.append(f"{method} {path} {request}: {answer.status_code} {answer.text[:200]}")
    assert not wrong, "\n".join(wrong)


async def test_the_login_throttle_is_declared(api: Api) -> None:
    operation = api.api.openapi()["paths"]["/api/auth/login"]["post"]
    assert "Retry-After" in operation["responses"]["429"]["headers"]
    assert operation["security"] == []  # public: the fuzzer's ignored_auth check skips it
