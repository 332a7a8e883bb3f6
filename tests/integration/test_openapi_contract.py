"""The OpenAPI document is the API's contract: every operation declares exactly the status
codes it can return (issue 15).

Each error code each operation declares is provoked here by a real request, and every answer
is checked against its operation's declaration (code, problem body, required headers). The
test fails on a code that was returned but is not declared, and on a code that is declared
but was never provoked. Codes every operation of a kind can return are provoked for each:
401 without a token, 403 with a VIEWER's, 413 with a body past the limit, 400 with a
malformed parameter or body, 503 from an API whose database is out of reach, 408 from
``serve``'s HTTP server for a body that never arrives. The others
(404, 409, 429, the 401/403 of the public routes) each have a request of their own below.
``test_openapi_fuzz`` also checks generated requests against the document.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App
from tickwork.api import create_api
from tickwork.api.security import ROUTE_ROLES
from tickwork.auth import AuthService, Role
from tickwork.http_bounds import Bounds
from tickwork.serve import _http_config
from tickwork.serve import _Server as Server  # uvicorn with an event once it listens
from tickwork.signals import Reactor, ReactorContext, Signal

from .api_support import BASE_URL, PASSWORD, Api, email, start_api

SECRET = "a signing key the live and the dead API share, 32+ characters"
MAX_BODY = 4096
PROBLEM = "application/problem+json"
MISSING = 987_654_321
"""An id no row has."""
HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging

Operation = tuple[str, str]
"""(METHOD, path template), as in ROUTE_ROLES and the document."""


class Ledger(Reactor):
    name = "ledger"
    handles = frozenset({"ORDER_PAID"})

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        pass


@dataclass
class Contract:
    """The document's declarations, and what the requests made against them found."""

    document: dict[str, Any]
    observed: dict[Operation, set[int]] = field(default_factory=lambda: defaultdict(set))
    wrong: list[str] = field(default_factory=list)

    def described(self, operation: Operation) -> dict[str, Any]:
        method, path = operation
        found: dict[str, Any] = self.document["paths"][path][method.lower()]
        return found

    def declared(self, operation: Operation) -> dict[str, Any]:
        responses: dict[str, Any] = self.described(operation)["responses"]
        return responses

    def operations(self) -> list[Operation]:
        return [
            (method.upper(), path)
            for path, operations in self.document["paths"].items()
            for method in operations
        ]

    async def ask(
        self,
        client: httpx.AsyncClient,
        operation: Operation,
        url: str,
        token: str | None,
        expect: int | frozenset[int],
        **request: Any,
    ) -> httpx.Response:
        """Send ``request`` for ``operation``; record its code, and what is wrong with it:
        a code other than ``expect``, one the operation does not declare, a problem body or
        header the declaration does not match."""
        headers = dict(request.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        answer = await client.request(operation[0], url, headers=headers, **request)
        return self.judge(operation, url, answer, expect)

    def judge(
        self,
        operation: Operation,
        url: str,
        answer: httpx.Response,
        expect: int | frozenset[int],
    ) -> httpx.Response:
        """Record ``answer`` to ``operation``, and what is wrong with it (as :meth:`ask`)."""
        code = answer.status_code
        self.observed[operation].add(code)
        said = f"{operation[0]} {url}: {code} {answer.text[:300]}"
        declared = self.declared(operation)
        if code not in (expect if isinstance(expect, frozenset) else {expect}):
            self.wrong.append(f"expected {expect}: {said}")
        if str(code) not in declared:
            self.wrong.append(f"undeclared code: {said}")
        elif code >= 400:
            response = declared[str(code)]
            if PROBLEM not in response.get("content", {}):
                self.wrong.append(f"declared without a problem body: {said}")
            if not answer.headers.get("content-type", "").startswith(PROBLEM):
                self.wrong.append(f"not a problem: {said}")
            elif answer.json().get("status") != code:
                self.wrong.append(f"problem's status differs: {said}")
            for name, header in response.get("headers", {}).items():
                if header.get("required") and name not in answer.headers:
                    self.wrong.append(f"no {name} header: {said}")
        return answer

    def never_provoked(self) -> list[str]:
        found = []
        for operation in self.operations():
            errors = {int(code) for code in self.declared(operation) if int(code) >= 400}
            for code in sorted(errors - self.observed[operation]):
                found.append(f"{operation[0]} {operation[1]}: {code} declared, never provoked")
        return found


@pytest.fixture
async def the_app(database_url: str, schema: str, clean: None) -> AsyncIterator[App]:
    app = App(
        database_url=database_url,
        schema=schema,
        auth={"jwt_secret": SECRET},
        api={"max_body_bytes": MAX_BODY},
    )

    @app.task(name="tests.echo", queue="api-tests")
    def echo(word: str = "hi") -> str:
        return word

    app.add_reactor(Ledger())
    yield app
    await app.aclose()


@pytest.fixture
async def api(the_app: App) -> AsyncIterator[Api]:
    async for found in start_api(the_app):  # no signal runtime here: no lease held
        yield found


def concrete(template: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, template)


def malformed(operation: Operation, described: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A request for ``operation`` with one malformed parameter, or else a malformed body."""
    path = operation[1]
    if "{" in path:
        return concrete(path, "%00"), {}  # neither a number nor storable text
    queries = [p["name"] for p in described.get("parameters", []) if p["in"] == "query"]
    if queries:
        return f"{path}?{queries[0]}=%00", {}
    return path, {"content": b"[]", "headers": {"content-type": "application/json"}}


async def structural(contract: Contract, api: Api) -> None:
    """401, 403, 413, 415 and 400 of every operation that declares them."""
    admin, viewer = api.tokens[Role.ADMIN], api.tokens[Role.VIEWER]
    for operation in contract.operations():
        method, path = operation
        declared = contract.declared(operation)
        url = concrete(path, "1")
        body = {"json": {}} if method != "GET" else {}
        if "401" in declared and ROUTE_ROLES[operation] is not None:
            await contract.ask(api.client, operation, url, None, 401, **body)
        if "403" in declared and (ROUTE_ROLES[operation] or Role.VIEWER) > Role.VIEWER:
            await contract.ask(api.client, operation, url, viewer, 403, **body)
        if "413" in declared:
            huge = {"content": b" " * (MAX_BODY + 1), "headers": {"content-type": "text/plain"}}
            await contract.ask(api.client, operation, url, admin, 413, **huge)
        if "415" in declared:
            plain = {"content": b"{}", "headers": {"content-type": "text/plain"}}
            await contract.ask(api.client, operation, url, admin, 415, **plain)
        if "400" in declared:
            bad_url, request = malformed(operation, contract.described(operation))
            await contract.ask(api.client, operation, bad_url, admin, 400, **request)


PUBLIC_BODIES: dict[Operation, dict[str, Any]] = {
    ("POST", "/api/auth/login"): {"email": "admin@example.com", "password": PASSWORD},
    ("POST", "/api/auth/refresh"): {"refresh_token": "twr_not-a-real-one"},
    ("POST", "/api/auth/logout"): {"refresh_token": "twr_not-a-real-one"},
    ("POST", "/api/invites/accept"): {"token": "twi_not-a-real-one", "password": PASSWORD},
}


async def unreachable(contract: Contract, api: Api) -> None:
    """503 of every operation that declares it, from the same API with no database: its
    pool connects to a port that refuses, tokens are signed with the same key."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = sock.getsockname()[1]
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            f"host=127.0.0.1 port={port} dbname=none connect_timeout=2",
            min_size=0,
            max_size=1,
            timeout=0.2,
            open=False,
        )
        await pool.open(wait=False)
        auth = AuthService(pool, api.app.db.store, api.app.settings.auth)
        await auth.start()  # the configured key: no database needed
        dead = create_api(api.app, auth, pool)
        transport = httpx.ASGITransport(app=dead)
        try:
            async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
                for operation in contract.operations():
                    if "503" not in contract.declared(operation):
                        continue
                    token = None if ROUTE_ROLES[operation] is None else api.tokens[Role.ADMIN]
                    body = PUBLIC_BODIES.get(operation)
                    request = {"json": body} if body else {}
                    url = concrete(operation[1], "1")
                    await contract.ask(client, operation, url, token, 503, **request)
        finally:
            await pool.close()


async def timeouts(contract: Contract, api: Api) -> None:
    """408 of every operation that declares it: the API under ``serve``'s HTTP server (its
    bounded protocol, a short body timeout), asked with a body that never arrives."""
    settings = api.app.settings.api.model_copy(update={"body_timeout": 0.05})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = Server(_http_config(api.api, "127.0.0.1", sock, Bounds.of(settings), settings))
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            await asyncio.wait_for(server.listening.wait(), HANG_GUARD)
            for operation in contract.operations():
                if "408" not in contract.declared(operation):
                    continue
                url = concrete(operation[1], "1")
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    f"{operation[0]} {url} HTTP/1.1\r\nHost: testserver\r\n"
                    f"Authorization: Bearer {api.tokens[Role.ADMIN]}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
                )
                raw = await asyncio.wait_for(reader.read(), HANG_GUARD)  # to the server's close
                writer.close()
                head, _, body = raw.partition(b"\r\n\r\n")
                status, *lines = head.decode("latin-1").split("\r\n")
                answer = httpx.Response(
                    int(status.split()[1]),
                    headers=[tuple(line.split(": ", 1)) for line in lines],
                    content=body,
                )
                contract.judge(operation, url, answer, 408)
        finally:
            server.should_exit = True
            await serving


async def refusals(contract: Contract, api: Api, sql: psycopg.Connection[Any]) -> None:
    """The codes a route declares itself: 404, 409, 429, and the public routes' 401/403."""
    admin = api.tokens[Role.ADMIN]
    operator = api.tokens[Role.OPERATOR]
    viewer = api.tokens[Role.VIEWER]
    ask = contract.ask
    c = api.client

    async def made(operation: Operation, url: str, token: str | None, **request: Any) -> Any:
        answer = await ask(c, operation, url, token, 201, **request)
        return answer.json()

    # 404: nothing of that id or name
    s = "/api/admin/signals"
    for method, path, token, body in (
        ("DELETE", "/api/me/tokens/{token_id}", viewer, None),
        ("PATCH", "/api/users/{user_id}", admin, {"role": "VIEWER"}),
        ("DELETE", "/api/invites/{invite_id}", admin, None),
        ("GET", "/api/jobs/{job_id}", viewer, None),
        ("GET", "/api/jobs/{job_id}/timeline", viewer, None),
        ("POST", "/api/jobs/{job_id}/retry", operator, None),
        ("POST", "/api/jobs/{job_id}/cancel", operator, None),
        ("DELETE", "/api/jobs/{job_id}", operator, None),
        ("GET", "/api/schedules/{name}", viewer, None),
        ("PATCH", "/api/schedules/{name}", admin, {"enabled": False}),
        ("DELETE", "/api/schedules/{name}", admin, None),
        ("POST", "/api/schedules/{name}/pause", operator, None),
        ("POST", "/api/schedules/{name}/resume", operator, None),
        ("POST", "/api/schedules/{name}/trigger", operator, None),
        ("DELETE", "/api/variables/{name}", admin, None),
        ("PUT", f"{s}/reactors/{{name}}/enabled", admin, {"enabled": False}),
        ("PUT", f"{s}/reactors/{{name}}/dry-run", admin, {"dry_run": True}),
        ("PUT", f"{s}/reactors/{{name}}/organisations", admin, {"organisations": ["1"]}),
        ("POST", f"{s}/reactors/{{name}}/sweep", admin, None),
        ("GET", f"{s}/{{signal_id}}", admin, None),
        ("POST", f"{s}/{{signal_id}}/retry", admin, None),
        ("POST", f"{s}/{{signal_id}}/reactors/{{name}}/retry", admin, None),
        ("POST", f"{s}/{{signal_id}}/cancel", admin, None),
        ("GET", "/api/definitions/{id}", viewer, None),
        ("PATCH", "/api/definitions/{id}", admin, {"enabled": False}),
        ("DELETE", "/api/definitions/{id}", admin, None),
        ("POST", "/api/definitions/{id}/pause", operator, None),
        ("POST", "/api/definitions/{id}/resume", operator, None),
        ("POST", "/api/definitions/{id}/run", operator, None),
        ("GET", "/api/definitions/{id}/activity", viewer, None),
        ("POST", "/api/definitions/{id}/webhook", admin, None),
        ("DELETE", "/api/definitions/{id}/webhook", admin, None),
        ("POST", "/api/webhooks/{id}/{token}", None, {"event": "push"}),
    ):
        request = {} if body is None else {"json": body}
        url = re.sub(r"\{(name|token)\}", "nope", path)
        url = re.sub(r"\{(?:[a-z_]+_)?id\}", str(MISSING), url)
        await ask(c, (method, path), url, token, 404, **request)

    # the public routes' own refusals
    login = ("POST", "/api/auth/login")
    await ask(c, login, login[1], None, 401, json={"email": email(Role.VIEWER), "password": "x"})
    refresh, logout = ("POST", "/api/auth/refresh"), ("POST", "/api/auth/logout")
    await ask(c, refresh, refresh[1], None, 401, json={"refresh_token": "twr_bogus"})
    cookie = {"headers": {"Cookie": "tickwork_refresh=twr_bogus"}}  # and no Origin
    await ask(c, refresh, refresh[1], None, 403, **cookie)
    await ask(c, logout, logout[1], None, 403, **cookie)
    accept = ("POST", "/api/invites/accept")
    await ask(c, accept, accept[1], None, 401, json={"token": "twi_bogus", "password": PASSWORD})

    # 403: a token asking for a stronger one (the caller's role is VIEWER's)
    tokens = ("POST", "/api/me/tokens")
    await ask(c, tokens, tokens[1], viewer, 403, json={"name": "up", "role": "ADMIN"})

    # 409s of users and invites
    me = (await c.get("/api/me", headers=api.headers(Role.ADMIN))).json()
    user = ("PATCH", "/api/users/{user_id}")
    await ask(c, user, f"/api/users/{me['id']}", admin, 409, json={"role": "OPERATOR"})
    invites = ("POST", "/api/invites")
    invite = {"email": email(Role.VIEWER).upper(), "role": "VIEWER"}
    await ask(c, invites, invites[1], admin, 409, json=invite)
    twice = [
        await made(invites, invites[1], admin, json={"email": "new@example.com", "role": "VIEWER"})
        for _ in range(2)
    ]
    await made(accept, accept[1], None, json={"token": twice[0]["token"], "password": PASSWORD})
    await ask(
        c, accept, accept[1], None, 409, json={"token": twice[1]["token"], "password": PASSWORD}
    )
    revoke = ("DELETE", "/api/invites/{invite_id}")
    await ask(c, revoke, f"/api/invites/{twice[0]['invite']['id']}", admin, 409)

    # 409s of jobs: a pending job cannot be retried; a cancelled one cannot be cancelled
    job = await made(("POST", "/api/jobs"), "/api/jobs", operator, json={"task": "tests.echo"})
    await ask(
        c, ("POST", "/api/jobs/{job_id}/retry"), f"/api/jobs/{job['id']}/retry", operator, 409
    )
    cancel = ("POST", "/api/jobs/{job_id}/cancel")
    await ask(c, cancel, f"/api/jobs/{job['id']}/cancel", operator, 200)
    await ask(c, cancel, f"/api/jobs/{job['id']}/cancel", operator, 409)
    # 409 of a delete: a RUNNING job (its attempt holds it); the cancelled one goes (204)
    delete = ("DELETE", "/api/jobs/{job_id}")
    running = await made(("POST", "/api/jobs"), "/api/jobs", operator, json={"task": "tests.echo"})
    sql.execute("UPDATE jobs SET state = 'RUNNING' WHERE id = %s", [running["id"]])
    await ask(c, delete, f"/api/jobs/{running['id']}", operator, 409)
    await ask(c, delete, f"/api/jobs/{job['id']}", operator, 204)

    # 409s of schedules: a name taken; one defined in code that a live worker runs
    schedule = {"name": "nightly", "task": "tests.echo", "cron": "0 3 * * *"}
    create = ("POST", "/api/schedules")
    await made(create, create[1], admin, json=schedule)
    await ask(c, create, create[1], admin, 409, json=schedule)
    api.app.add_schedule("from-code", "tests.echo", "0 4 * * *")
    definer = api.app.worker(queues=["none"])
    await definer.open()
    try:
        pool = await api.app.db.async_pool()
        await api.app.scheduler_service(pool).scheduler.sync(
            list(api.app.schedules.values()), defined_by=definer.id
        )
        coded = "/api/schedules/from-code"
        edit = ("PATCH", "/api/schedules/{name}")
        await ask(c, edit, coded, admin, 409, json={"enabled": False})
        await ask(c, ("DELETE", "/api/schedules/{name}"), coded, admin, 409)
    finally:
        await definer.close()

    # 409s of definitions: a name taken, at creation and by a rename
    definitions = ("POST", "/api/definitions")
    ping = {"name": "ping", "kind": "http", "http": {"url": "https://example.com/"}}
    await made(definitions, definitions[1], admin, json=ping)
    await ask(c, definitions, definitions[1], admin, 409, json=ping)
    other = await made(definitions, definitions[1], admin, json=ping | {"name": "pong"})
    rename = ("PATCH", "/api/definitions/{id}")
    await ask(c, rename, f"/api/definitions/{other['id']}", admin, 409, json={"name": "ping"})
    # 409 of a webhook: its definition is paused
    hook = await made(
        ("POST", "/api/definitions/{id}/webhook"), f"/api/definitions/{other['id']}/webhook", admin
    )
    await ask(
        c,
        ("POST", "/api/definitions/{id}/pause"),
        f"/api/definitions/{other['id']}/pause",
        operator,
        200,
    )
    await ask(c, ("POST", "/api/webhooks/{id}/{token}"), hook["path"], None, 409, json={})
    # 429: past api.webhook_rate calls a minute (60) of one definition's webhook
    for _ in range(59):
        await c.post(hook["path"], json={})
    await ask(c, ("POST", "/api/webhooks/{id}/{token}"), hook["path"], None, 429, json={})

    # the signals: 409 where this process holds no lease, 503 where nobody does
    put = {"dry-run": {"dry_run": True}, "organisations": {"organisations": ["1"]}}
    for switch, body in put.items():
        path = f"{s}/reactors/{{name}}/{switch}"
        await ask(c, ("PUT", path), concrete(path, "ledger"), admin, 409, json=body)
    sweep = f"{s}/reactors/{{name}}/sweep"
    await ask(c, ("POST", sweep), concrete(sweep, "ledger"), admin, 409)
    enabled = f"{s}/reactors/{{name}}/enabled"
    await ask(c, ("PUT", enabled), concrete(enabled, "ledger"), admin, 503, json={"enabled": True})
    for path in (f"{s}/processor/enabled", f"{s}/sweeps/enabled"):
        await ask(c, ("PUT", path), path, admin, 503, json={"enabled": True})
    dead = await api.app.signals.emit_async("ORDER_PAID", "Order", 1, "order:1")
    sql.execute("UPDATE signals SET status = 'DEAD' WHERE id = %s", [dead.signal_id])
    await api.app.signals.emit_async("ORDER_PAID", "Order", 1, "order:1")  # a fresher one
    retry = f"{s}/{{signal_id}}/retry"
    await ask(c, ("POST", retry), concrete(retry, str(dead.signal_id)), admin, 409)

    await password_race(contract, api, sql)

    # 429: an account throttled after failed logins (last: it locks the OPERATOR out)
    wrong = {"email": email(Role.OPERATOR), "password": "not the password"}
    for _ in range(api.app.settings.auth.login_max_per_account):
        await ask(c, login, login[1], None, 401, json=wrong)
    right = {"email": email(Role.OPERATOR), "password": PASSWORD}
    await ask(c, login, login[1], None, 429, json=right)
    change = {"current_password": PASSWORD, "new_password": "another long password"}
    password = ("POST", "/api/me/password")
    await ask(c, password, password[1], operator, 429, json=change)


BLOCKED_BY = """
WITH RECURSIVE blocked(pid) AS (
    SELECT a.pid FROM pg_stat_activity a WHERE %(holder)s = ANY(pg_blocking_pids(a.pid))
    UNION
    SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY(pg_blocking_pids(a.pid))
)
SELECT count(*) FROM blocked
"""


async def password_race(contract: Contract, api: Api, sql: psycopg.Connection[Any]) -> None:
    """409 of a password change that lost a race: two changes of one user's password, both
    with the right current password, held at their write by a lock on the user's row until
    both wait there; released, one stores its password and the other finds it changed."""
    racer = "racer@example.com"
    await api.auth.create_user(racer, PASSWORD, Role.VIEWER)
    token = (await api.login(racer)).json()["access_token"]
    password = ("POST", "/api/me/password")
    with psycopg.connect(sql.info.dsn, autocommit=False) as lock:
        lock.execute(f"SET search_path TO {api.app.settings.schema_name}")
        lock.execute("SELECT 1 FROM users WHERE email = %s FOR UPDATE", [racer])
        changes = [
            asyncio.ensure_future(
                contract.ask(
                    api.client,
                    password,
                    password[1],
                    token,
                    frozenset({204, 409}),  # which of the two wins is the database's choice
                    json={"current_password": PASSWORD, "new_password": f"{word} long password"},
                )
            )
            for word in ("first", "second")
        ]

        async def both_waiting() -> None:
            # (asked on another connection: a transaction sees one snapshot of the activity)
            holder = {"holder": lock.info.backend_pid}
            while sql.execute(BLOCKED_BY, holder).fetchone() != (2,):  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # (the lock table has no event to wait on)

        await asyncio.wait_for(both_waiting(), HANG_GUARD)
        lock.commit()
    answers = await asyncio.gather(*changes)
    codes = sorted(a.status_code for a in answers)
    assert codes == [204, 409], [a.text for a in answers]


async def test_every_operation_declares_exactly_the_codes_it_can_return(
    api: Api, sql: psycopg.Connection[Any]
) -> None:
    contract = Contract(api.api.openapi())
    await structural(contract, api)
    await refusals(contract, api, sql)
    await unreachable(contract, api)
    await timeouts(contract, api)
    assert not contract.wrong, "\n".join(contract.wrong)
    never = contract.never_provoked()
    assert not never, "\n".join(never)
