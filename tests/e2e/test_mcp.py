"""The MCP endpoint driven by the SDK's own client over real HTTP against a real ``tickwork
serve``: the tools it lists; each tool, as ADMIN, OPERATOR and VIEWER, answers what the REST
route answers that role (a read the same data, a refusal the same problem); no token, a
revoked or expired one, a foreign Origin or Host are refused before any tool; every change
is audited as made through MCP; a tool's failure comes back as a tool error holding the
API's problem detail. And the stdio mode, for a desktop assistant."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent
from pydantic import AnyUrl

import tickwork
from tickwork import App
from tickwork.api.security import ROUTE_ROLES
from tickwork.auth import AuthService, Role

from .support import HANG_GUARD, serving

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
INSPECTOR = E2E_DIR.parents[1] / "ui" / "node_modules" / ".bin" / "mcp-inspector"
"""The official MCP Inspector (a devDependency of ui/, installed by ``npm ci --prefix ui``)."""
NO_OAUTH = "tickwork does not do OAuth"
PASSWORD = "correct horse battery staple"
USERS = {"ADMIN": "admin@example.com", "OPERATOR": "ops@example.com", "VIEWER": "view@example.com"}
MUTATIONS = {  # tool -> the REST route it calls
    "retry_job": ("POST", "/api/jobs/{job_id}/retry"),
    "cancel_job": ("POST", "/api/jobs/{job_id}/cancel"),
    "delete_job": ("DELETE", "/api/jobs/{job_id}"),
    "enqueue_job": ("POST", "/api/jobs"),
    "pause_queue": ("POST", "/api/queues/{name}/pause"),
    "resume_queue": ("POST", "/api/queues/{name}/resume"),
    "trigger_schedule": ("POST", "/api/schedules/{name}/trigger"),
    "run_definition": ("POST", "/api/definitions/{id}/run"),
    "retry_signal": ("POST", "/api/admin/signals/{signal_id}/retry"),
    "retry_delivery": ("POST", "/api/admin/signals/{signal_id}/reactors/{name}/retry"),
}
READS = {  # tool -> (its arguments, the REST route and query that answers the same)
    "list_jobs": ({"limit": 5}, "/api/jobs?limit=5"),
    "queue_stats": ({}, "/api/queues"),
    "list_schedules": ({}, "/api/schedules"),
    "list_definitions": ({}, "/api/definitions?limit=50"),
    "signal_stats": ({}, "/api/admin/signals/stats"),
    "stuck_signals": ({}, "/api/admin/signals/stuck"),
    "health": ({}, "/api/health"),
    "leaders": ({}, "/api/leaders"),
    "workers": ({}, "/api/workers"),
}


@pytest.fixture
def served(db_env: dict[str, str], app: App, tmp_path: Path) -> Iterator[str]:
    """``tickwork serve`` of the dashboard's app on the test schema, a user per role."""

    async def users() -> None:
        auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
        await auth.start()
        for role, email in USERS.items():
            await auth.create_user(email, PASSWORD, role)

    app.migrate()
    asyncio.run(users())
    env = db_env | {
        "PYTHONPATH": os.pathsep.join(p for p in (str(E2E_DIR), os.environ.get("PYTHONPATH")) if p),
        "TICKWORK_WORKER__QUEUES": '["ui"]',
        "TICKWORK_RUNTIMES__SERVE": "[]",
    }
    with serving(env, tmp_path, "--app", "dashboard_app:app", "--log-level", "ERROR") as started:
        assert "MCP endpoint: " in started[2]
        yield started[1]


def api_token(url: str, role: str, **fields: Any) -> tuple[int, str]:
    """A personal API token of the role's user: its id and the token."""
    login = httpx.post(f"{url}/api/auth/login", json={"email": USERS[role], "password": PASSWORD})
    assert login.status_code == 200, login.text
    session = {"Authorization": f"Bearer {login.json()['access_token']}"}
    made = httpx.post(f"{url}/api/me/tokens", json={"name": "assistant", **fields}, headers=session)
    assert made.status_code == 201, made.text
    return int(made.json()["api_token"]["id"]), str(made.json()["token"])


def rest(url: str, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, f"{url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
    )


@asynccontextmanager
async def connected(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def problem(result: CallToolResult) -> dict[str, Any]:
    """The API's problem detail a failed tool carries."""
    assert result.isError, result
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert text.text.startswith("Error executing tool "), text.text  # then the problem
    found: dict[str, Any] = json.loads(text.text[text.text.index("{") :])
    return found


def identity(value: Any) -> Any:
    """What two reads a moment apart agree on while the serve's worker runs jobs: which
    things an answer names (ids, names), not their changing counts, states or clocks."""
    if isinstance(value, dict) and isinstance(value.get("items"), list):
        return ("page", identity(value["items"]))
    if isinstance(value, list):
        keys = ("id", "name", "worker_id", "role", "lease", "queue")
        return sorted(
            str(next((item[k] for k in keys if k in item), sorted(item)))
            if isinstance(item, dict)
            else str(item)
            for item in value
        )
    if isinstance(value, dict):
        return sorted(value)
    return value


async def test_the_tools_are_listed_with_schemas_resources_and_prompts(served: str) -> None:
    _, token = api_token(served, "VIEWER")
    async with connected(served, token) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"get_job", "list_jobs", *MUTATIONS, *READS}
        for tool in tools.values():
            assert tool.description and len(tool.description) > 30, tool.name
            assert tool.inputSchema["type"] == "object", tool.name
            assert tool.outputSchema is not None and tool.outputSchema["type"] == "object"
        assert tools["list_jobs"].inputSchema["properties"]["limit"]["maximum"] == 100
        assert tools["list_jobs"].annotations and tools["list_jobs"].annotations.readOnlyHint
        assert tools["cancel_job"].annotations and tools["cancel_job"].annotations.destructiveHint
        assert tools["delete_job"].annotations and tools["delete_job"].annotations.destructiveHint
        ran = tools["run_definition"].annotations  # an HTTP definition calls out
        assert ran and ran.openWorldHint and not ran.destructiveHint and not ran.readOnlyHint
        docs = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"tickwork://docs/api", "tickwork://docs/dashboard"} <= docs
        assert {"tickwork://docs/tutorials/first-task", "tickwork://docs/reference/cli"} <= docs
        page = await session.read_resource(AnyUrl("tickwork://docs/api"))
        assert "GET /api/jobs" in page.contents[0].text  # type: ignore[union-attr]
        templates = (await session.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["tickwork://jobs/{job_id}/output"]
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert prompts == {"queue_backing_up", "why_did_it_fail"}
        asked = await session.get_prompt("queue_backing_up", {"queue": "imports"})
        assert "'imports'" in asked.messages[0].content.text  # type: ignore[union-attr]


async def test_each_role_gets_what_the_api_gives_it(
    served: str, app: App, sql: psycopg.Connection[Any], tmp_path: Path
) -> None:
    tokens = {role: api_token(served, role)[1] for role in USERS}
    admin = tokens["ADMIN"]
    schedule = {"name": "mcp-nightly", "task": "ui.ok", "cron": "0 3 * * *", "queue": "held"}
    assert rest(served, admin, "POST", "/api/schedules", schedule).status_code == 201
    definition = rest(
        served, admin, "POST", "/api/definitions",
        {"name": "mcp-ping", "kind": "http", "http": {"url": "https://example.com/"}},
    )  # fmt: skip
    assert definition.status_code == 201, definition.text
    done = rest(served, admin, "POST", "/api/jobs", {"task": "ui.ok", "args": {"word": "mcp"}})
    assert done.status_code == 201, done.text
    for role, token in tokens.items():
        async with connected(served, token) as session:
            # reads: the same data as the REST route, or the same refusal
            for tool, (arguments, path) in READS.items():
                answer = rest(served, token, "GET", path)
                result = await session.call_tool(tool, arguments)
                if answer.status_code == 200:
                    assert not result.isError, (role, tool, result)
                    got = result.structuredContent
                    assert got is not None, (role, tool)
                    expected = answer.json()
                    if isinstance(expected, list):
                        got = got["result"]
                    assert identity(got) == identity(expected), (role, tool)
                else:
                    refused = problem(result)
                    assert refused["status"] == answer.status_code == 403, (role, tool)
                    assert refused["detail"] == answer.json()["detail"]

            # changes: allowed exactly where the route table allows the role
            dead = rest(
                served, admin, "POST", "/api/jobs",
                {"task": "ui.flaky", "args": {"marker": str(tmp_path / f"{role}.marker")}},
            ).json()["id"]  # fmt: skip
            held = rest(
                served, admin, "POST", "/api/jobs", {"task": "ui.ok", "queue": "held"}
            ).json()["id"]
            assert (await app.wait_async(dead, timeout=60)).state.value == "DEAD_LETTER"
            calls = {
                "retry_job": {"job_id": dead},
                "cancel_job": {"job_id": held},
                "delete_job": {"job_id": held},  # cancelled first where the role may
                "enqueue_job": {"task": "ui.ok", "args": {"word": role}},
                "pause_queue": {"name": "held"},
                "resume_queue": {"name": "held"},
                "trigger_schedule": {"name": "mcp-nightly"},
                "run_definition": {"definition_id": definition.json()["id"]},
                "retry_signal": {"signal_id": 999999},
                "retry_delivery": {"signal_id": 999999, "reactor": "nobody"},
            }
            for tool, arguments in calls.items():
                result = await session.call_tool(tool, arguments)
                allowed = Role[role] >= ROUTE_ROLES[MUTATIONS[tool]]
                if not allowed:
                    refused = problem(result)
                    assert refused["status"] == 403, (role, tool, refused)
                    assert ROUTE_ROLES[MUTATIONS[tool]].name in refused["detail"]
                elif tool in {"retry_signal", "retry_delivery"}:
                    assert problem(result)["status"] == 404, (role, tool)  # the API's 404
                else:
                    assert not result.isError, (role, tool, result)
            gone = rest(served, admin, "GET", f"/api/jobs/{held}")
            assert gone.status_code == (404 if Role[role] >= Role.OPERATOR else 200), gone.text
            if Role[role] >= Role.OPERATOR:
                job = await session.call_tool("get_job", {"job_id": dead})
                assert job.structuredContent is not None
                events = [e["event"] for e in job.structuredContent["timeline"]]
                assert "job.retried" in events

    # every change made through MCP is audited with the token's user, as made through MCP
    audited = sql.execute(
        "SELECT actor, event_type FROM audit_events WHERE actor LIKE 'mcp:%' ORDER BY id"
    ).fetchall()
    by_event: dict[str, set[str]] = {}
    for actor, event in audited:
        by_event.setdefault(event, set()).add(actor.split(":")[-1])
    for event in (
        "job.retried",
        "job.cancelled",
        "job.deleted",
        "job.enqueued",
        "queue.paused",
        "queue.resumed",
        "schedule.triggered",
        "definition.run",
    ):
        assert by_event.get(event) == {USERS["ADMIN"], USERS["OPERATOR"]}, (event, by_event)
    assert all(actor.startswith("mcp:api_token:") for actor, _ in audited)
    assert not any(USERS["VIEWER"] in actor for actor, _ in audited)


async def test_initialize_names_tickwork_and_its_own_version(served: str) -> None:
    _, token = api_token(served, "VIEWER")
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client,
        streamable_http_client(f"{served}/mcp", http_client=client) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        started = await session.initialize()
    assert started.serverInfo.name == "tickwork"
    assert started.serverInfo.version == tickwork.__version__  # not the SDK's


async def test_errors_are_tool_errors_holding_the_apis_problem(served: str, app: App) -> None:
    _, token = api_token(served, "OPERATOR")
    async with connected(served, token) as session:
        missing = problem(await session.call_tool("get_job", {"job_id": 987654}))
        assert missing["status"] == 404 and missing["title"]
        not_there = problem(await session.call_tool("delete_job", {"job_id": 987654}))
        assert not_there["status"] == 404 and "987654" in not_there["detail"]
        no_id = await session.call_tool("delete_job", {"job_id": 0})  # the tool's schema
        assert no_id.isError and "job_id" in no_id.content[0].text  # type: ignore[union-attr]
        unknown = problem(await session.call_tool("enqueue_job", {"task": "no.such.task"}))
        assert unknown["status"] == 400 and "no.such.task" in unknown["detail"]
        bad = problem(await session.call_tool("list_jobs", {"search": "a\x00b"}))
        assert bad["status"] == 400 and bad["field"] == "q"
        dots = problem(await session.call_tool("retry_delivery", {"signal_id": 1, "reactor": ".."}))
        assert dots["status"] == 400 and dots["field"] == "reactor"  # not folded into /retry
        long = await session.call_tool("list_jobs", {"queue": "q" * 300})
        assert long.isError and "queue" in long.content[0].text  # type: ignore[union-attr]
        too_many = await session.call_tool("list_jobs", {"limit": 1000})  # the tool's schema
        assert too_many.isError and "limit" in too_many.content[0].text  # type: ignore[union-attr]
        done = await session.call_tool("enqueue_job", {"task": "ui.ok", "args": {"word": "out"}})
        job_id = done.structuredContent["id"]  # type: ignore[index]
        assert (await app.wait_async(job_id, timeout=60)).state.value == "SUCCEEDED"
        output = await session.read_resource(AnyUrl(f"tickwork://jobs/{job_id}/output"))
        assert output.contents[0].text.strip() == '"out"'  # type: ignore[union-attr]
        # a name is one path segment: it cannot reach another route
        held = rest(served, token, "POST", "/api/jobs", {"task": "ui.ok", "queue": "held"})
        sneaky = f"../jobs/{held.json()['id']}/cancel"
        refused = problem(await session.call_tool("pause_queue", {"name": sneaky}))
        assert 400 <= refused["status"] < 500, refused  # no route takes it
        still = rest(served, token, "GET", f"/api/jobs/{held.json()['id']}").json()
        assert still["state"] == "PENDING" and still["cancel_requested_at"] is None
    # a body nested past any parser's depth is refused, not a crash
    bomb = await asyncio.to_thread(
        httpx.post,
        f"{served}/mcp",
        content=b"[" * 100_000,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert 400 <= bomb.status_code < 500, bomb.text


async def test_requests_without_a_good_token_or_from_elsewhere_are_refused(
    served: str, sql: psycopg.Connection[Any]
) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}

    def post(headers: dict[str, str]) -> httpx.Response:
        return httpx.post(f"{served}/mcp", json=hello, headers=accept | headers)

    token_id, token = api_token(served, "ADMIN")
    bearer = {"Authorization": f"Bearer {token}"}
    assert post(bearer).status_code == 200
    assert post({}).status_code == 401
    assert post({"Authorization": "Bearer twa_not-a-token"}).status_code == 401
    assert post(bearer | {"Origin": "http://evil.example"}).status_code == 403
    assert post(bearer | {"Host": "evil.example"}).status_code == 421
    assert post(bearer | {"Origin": served}).status_code == 200  # the server's own pages
    # an expired token, then a revoked one
    expiring_id, expiring = api_token(served, "ADMIN", expires_in=3600)
    sql.execute(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = %s",
        [expiring_id],
    )
    assert post({"Authorization": f"Bearer {expiring}"}).status_code == 401
    revoked = rest(served, token, "DELETE", f"/api/me/tokens/{token_id}")
    assert revoked.status_code == 204, revoked.text
    assert post(bearer).status_code == 401


async def test_protocol_errors_are_the_specifications(served: str) -> None:
    """An unknown tool is a JSON-RPC error (-32602), not a tool result; a resource that does
    not exist is -32002 with its URI, its message said once."""
    _, token = api_token(served, "VIEWER")
    async with connected(served, token) as session:
        with pytest.raises(McpError) as unknown:
            await session.call_tool("drop_everything", {})
        assert unknown.value.error.code == -32602
        assert unknown.value.error.message == "Unknown tool: drop_everything"
        for uri in ("tickwork://jobs/987654/output", "tickwork://docs/nothing-here"):
            with pytest.raises(McpError) as missing:
                await session.read_resource(AnyUrl(uri))
            error = missing.value.error
            assert (error.code, error.message, error.data) == (
                -32002,
                "Resource not found",
                {"uri": uri},
            )
        with pytest.raises(McpError) as no_prompt:
            await session.get_prompt("why_did_it_fail", {})
        assert no_prompt.value.error.code == -32602


def test_a_client_without_a_good_token_is_told_to_send_one_not_sent_to_oauth(
    served: str,
) -> None:
    """The 401 says (RFC 6750) that tickwork takes a bearer token; the places an OAuth
    client looks for an authorization server are 404s that say the same."""
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    realm = 'Bearer realm="tickwork"'
    description = (
        f'error_description="a personal API token is required as a bearer token; {NO_OAUTH}"'
    )
    bare = httpx.post(f"{served}/mcp", json=listing, headers=accept)
    assert bare.status_code == 401 and NO_OAUTH in bare.json()["detail"]
    # no token sent: no error code (RFC 6750 section 3.1), what to send
    assert bare.headers["www-authenticate"] == f"{realm}, {description}"
    for sent in ("Bearer twk_not-a-token", "Basic dXNlcjpwYXNz"):
        wrong = httpx.post(f"{served}/mcp", json=listing, headers=accept | {"Authorization": sent})
        assert wrong.status_code == 401
        expected = f'{realm}, error="invalid_token", {description}' if "Bearer" in sent else None
        assert wrong.headers["www-authenticate"] == (expected or f"{realm}, {description}")
    # what the SDK's client meets: the 401 itself, not an OAuth flow
    for method, path in (
        ("GET", "/.well-known/oauth-protected-resource"),
        ("GET", "/.well-known/oauth-protected-resource/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/openid-configuration"),
        ("GET", "/authorize?response_type=code&client_id=x"),
        ("POST", "/register"),
        ("POST", "/token"),
    ):
        answer = httpx.request(method, f"{served}{path}", json={"client_name": "x"})
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.headers["content-type"] == "application/problem+json", path
        assert NO_OAUTH in answer.json()["detail"], path


def inspector(url: str, home: Path, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    """``mcp-inspector --cli URL/mcp --transport http ARGS``: its exit code and the JSON it
    prints (an answer on stdout, an error as the last line of stderr; its own files are kept
    under ``home``)."""
    done = subprocess.run(
        [str(INSPECTOR), "--cli", f"{url}/mcp", "--transport", "http", *args],
        env=os.environ | {"HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory"} | env,
        stdin=subprocess.DEVNULL,  # no TTY: as in CI or an assistant's shell
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,  # not a timing assertion: only stops a hang
    )
    printed = done.stdout.strip() or done.stderr.strip().splitlines()[-1]
    found: dict[str, Any] = json.loads(printed)
    return done.returncode, found


@pytest.mark.skipif(not INSPECTOR.exists(), reason="no MCP Inspector: npm ci --prefix ui")
def test_the_mcp_inspector_cli_works_with_a_bearer_token(served: str, tmp_path: Path) -> None:
    _, token = api_token(served, "VIEWER")
    bearer = f"Authorization: Bearer {token}"
    code, listed = inspector(served, tmp_path, "--header", bearer, "--method", "tools/list")
    assert code == 0, listed
    tools = {t["name"]: t for t in listed["tools"]}
    assert {"get_job", "list_jobs", *MUTATIONS, *READS} == set(tools)
    assert tools["run_definition"]["annotations"]["openWorldHint"] is True
    code, called = inspector(
        served, tmp_path, "--header", bearer, "--method", "tools/call",
        "--tool-name", "list_jobs", "--tool-arg", "limit=1",
    )  # fmt: skip
    assert code == 0 and called["structuredContent"]["items"] == [], called
    code, missing = inspector(
        served, tmp_path, "--header", bearer, "--method", "resources/read",
        "--uri", "tickwork://jobs/987654/output",
    )  # fmt: skip
    assert code != 0 and missing["error"]["message"] == "Resource not found", missing
    # without a token, asked not to start an OAuth flow: the server's 401, saying what to send
    code, refused = inspector(served, tmp_path, "--stored-auth-only", "--method", "tools/list")
    assert code != 0 and NO_OAUTH in refused["error"]["message"], refused
    # and when it does try OAuth (it does at any 401): it finds no authorization server, and
    # the 404 says what to send
    code, tried = inspector(
        served, tmp_path, "--method", "tools/list", MCP_AUTO_OPEN_ENABLED="true", BROWSER="true"
    )
    assert code != 0 and "404" in tried["error"]["message"], tried
    assert NO_OAUTH in tried["error"]["message"], tried


async def test_a_desktop_assistant_talks_over_stdio(db_env: dict[str, str], app: App) -> None:
    app.migrate()
    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    user = await auth.create_user(USERS["VIEWER"], PASSWORD, "VIEWER")
    _, token = await auth.create_api_token(user.id, "desktop", "VIEWER", None)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tickwork", "mcp", "--stdio"],
        env=db_env | {"TICKWORK_MCP_TOKEN": token},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.call_tool("list_jobs", {})
        assert not listed.isError and listed.structuredContent == {
            "items": [],
            "next_cursor": None,
            "total": None,
        }
        refused = problem(await session.call_tool("pause_queue", {"name": "q"}))
        assert refused["status"] == 403


def test_mcp_alone_serves_only_mcp_within_its_limits(
    db_env: dict[str, str], app: App, tmp_path: Path
) -> None:
    """``serve --roles mcp``: no REST route and no page, only ``POST /mcp``; a body over
    api.max_body_bytes, not UTF-8 or nested too deep is refused before the SDK parses it; a
    person past mcp.rate requests a minute (whichever of their tokens) gets 429 with
    Retry-After, another person does not; an address sending refused tokens past the rate
    gets 429 before its tokens are looked up."""

    async def tokens() -> list[str]:
        auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
        await auth.start()
        found = []
        for role in ("VIEWER", "OPERATOR"):
            user = await auth.create_user(USERS[role], PASSWORD, role)
            found += [(await auth.create_api_token(user.id, n, role, None))[1] for n in "ab"]
        return found

    app.migrate()
    first, first_again, other, _ = asyncio.run(tokens())
    env = db_env | {"TICKWORK_MCP__RATE": "4", "TICKWORK_MCP__MAX_BODY_BYTES": "2048"}
    with serving(env, tmp_path, "--roles", "mcp", "--log-level", "ERROR") as (_, url, printed):
        assert "MCP endpoint: " in printed and "API docs" not in printed
        assert httpx.get(f"{url}/api/jobs").status_code == 404
        assert httpx.get(f"{url}/").status_code == 404
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}

        def post(token: str, body: Any = listing, **headers: str) -> httpx.Response:
            sent = accept | {"Authorization": f"Bearer {token}"} | headers
            if isinstance(body, bytes):
                return httpx.post(f"{url}/mcp", content=body, headers=sent)
            return httpx.post(f"{url}/mcp", json=body, headers=sent)

        # before any body is read: the method, the path, the Host, the token
        viewer = {"Authorization": f"Bearer {other}"}
        assert httpx.get(f"{url}/mcp", headers=viewer | accept).status_code == 405
        slash = httpx.post(f"{url}/mcp/", json=listing, headers=viewer | accept)
        assert slash.status_code == 404 and "location" not in slash.headers
        assert post(other, Host="127.0.0.1:evil.example").status_code == 421
        assert post(other, Host="localhost:").status_code == 421
        # the bodies the SDK is not handed
        huge = listing | {"params": {"padding": "x" * 4096}}
        assert post(first, huge).status_code == 413
        bad_utf8 = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "\xff\xfe"}}'
        )
        assert post(first, bad_utf8, **{"Content-Type": "application/json"}).status_code == 400
        utf16 = json.dumps(listing).encode("utf-16-le")  # JSON the SDK's parser would take
        assert post(first, utf16, **{"Content-Type": "application/json"}).status_code == 400
        two = httpx.post(
            f"{url}/mcp",
            json=listing,
            headers=[
                ("Authorization", f"Bearer {first}"),
                ("Authorization", f"Bearer {other}"),
                *accept.items(),
            ],
        )
        assert two.status_code == 400 and "one Authorization header" in two.text
        # one person's rate, whichever token: 413, 400, 400, then two more, then 429
        assert [post(first_again).status_code for _ in range(1)] == [200]
        limited = post(first)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert "too many MCP requests" in limited.json()["detail"]
        assert post(other).status_code == 200  # another person is not held back
        # refused tokens, counted by address: past the rate, 429 before any lookup
        assert [post(f"twk_made-up-{n}").status_code for n in range(4)] == [401] * 4
        assert post("twk_made-up-again").status_code == 429
        assert post(other).status_code == 200  # a valid token from there is not held back
