"""A secret a run used never reaches a VIEWER, nor the server log, in any form it takes on
its way out (issue 37): percent-encoded whole or in part (a URL's query, its user-info),
lower-cased (a URL's host), JSON- and repr-escaped (an echoed answer, an error naming a
value). Real HTTP calls to a local echo service and a real script; read back as a VIEWER
through the REST API (the job, its timeline) and MCP (``get_job``, the output resource)."""

from __future__ import annotations

import io
import json
import logging
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tickwork import App, logs
from tickwork.auth import Role
from tickwork.runtimes.available import runtime_of
from tickwork.types import JobState

from ..secret_forms import leaks
from .api_support import PASSWORD, Api, start_api

PASSWORD_SECRET = "Pa ss@w0rd#42"
"""The red team's secret: a space, an ``@`` and a ``#`` (which starts a URL's fragment)."""
HOST_SECRET = "MySecretHostName"
"""A secret that lands in a URL's host, which URL parsers lower-case."""
QUOTE_SECRET = "Qu\"ote\\back-slash'ü"
"""A secret whose JSON and repr spellings differ from it."""
SECRETS = (PASSWORD_SECRET, HOST_SECRET, QUOTE_SECRET)


class Echo(BaseHTTPRequestHandler):
    """Answers every GET with what it was sent (path and headers, as JSON), with the status
    the path asks for (``/echo`` 200, ``/status/500`` 500)."""

    def do_GET(self) -> None:
        status = (
            int(self.path.split("/")[2].split("?")[0]) if self.path.startswith("/status/") else 200
        )
        body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Path", self.path)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def api(database_url: str, schema: str, clean: None) -> AsyncIterator[Api]:
    the_app = App(
        database_url=database_url,
        schema=schema,
        runtimes={"http": {"allow_networks": ["127.0.0.1/32"]}},
    )
    try:
        async for started in start_api(the_app):
            yield started
    finally:
        await the_app.aclose()


@pytest.fixture
def server_log() -> Iterator[io.StringIO]:
    """tickwork's log as ``tickwork serve`` writes it (``logs.configure``), captured, at
    DEBUG; httpx's records too (an application embedding tickwork may show them)."""
    root = logging.getLogger("tickwork")
    httpx_log = logging.getLogger("httpx")
    saved = (root.handlers[:], root.level, root.propagate, httpx_log.level)
    logs.configure("DEBUG")
    stream = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    httpx_log.setLevel(logging.DEBUG)
    httpx_log.addHandler(handler)
    try:
        yield stream
    finally:
        httpx_log.removeHandler(handler)
        root.handlers[:], root.level, root.propagate = saved[0], saved[1], saved[2]
        httpx_log.setLevel(saved[3])


async def admin_call(api: Api, method: str, path: str, body: Any = None) -> Any:
    answer = await api.client.request(method, path, json=body, headers=api.headers(Role.ADMIN))
    assert answer.status_code < 300, answer.text
    return answer.json() if answer.content else None


async def run(api: Api, definition_id: int) -> int:
    """Run the definition now on its runtime's worker; the job's id."""
    ran = await api.client.post(
        f"/api/definitions/{definition_id}/run", headers=api.headers(Role.OPERATOR)
    )
    assert ran.status_code == 202, ran.text
    job_id: int = ran.json()["job_id"]
    job = await api.app.get_job_async(job_id)
    async with api.app.worker(runtime=runtime_of(job.queue), concurrency=1) as worker:
        assert len((await worker.run_once()).outcomes) == 1
    return job_id


async def viewer_reads(api: Api, job_id: int) -> dict[str, str]:
    """Everything a VIEWER reads of a job: its REST answers and its MCP answers, as text."""
    from tickwork.mcp.server import http_endpoint

    seen: dict[str, str] = {}
    for path in (f"/api/jobs/{job_id}", f"/api/jobs/{job_id}/timeline"):
        answer = await api.client.get(path, headers=api.headers(Role.VIEWER))
        assert answer.status_code == 200, answer.text
        seen[path] = answer.text
    owner = await api.auth.create_user(f"assistant{job_id}@example.com", PASSWORD, Role.VIEWER)
    _, token = await api.auth.create_api_token(owner.id, "assistant", Role.VIEWER, None)
    endpoint = http_endpoint(api.app.settings, api.auth, api.api, None)
    transport = httpx.ASGITransport(app=endpoint)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    calls = {
        "mcp get_job": ("tools/call", {"name": "get_job", "arguments": {"job_id": job_id}}),
        "mcp output": ("resources/read", {"uri": f"tickwork://jobs/{job_id}/output"}),
    }
    async with (
        endpoint.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client,
    ):
        for name, (method, params) in calls.items():
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answer = await client.post("/mcp", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            assert '"error"' not in answer.text[:200], answer.text
            seen[name] = answer.text
    return seen


def assert_no_leak(seen: dict[str, str]) -> None:
    found = {
        (where, secret): leaks(text, secret) for where, text in seen.items() for secret in SECRETS
    }
    assert {k: v for k, v in found.items() if v} == {}


async def test_no_form_of_a_secret_an_http_run_used_reaches_a_viewer_or_the_log(
    api: Api, echo: str, server_log: io.StringIO
) -> None:
    for name, value in (("pw", PASSWORD_SECRET), ("host", HOST_SECRET), ("q", QUOTE_SECRET)):
        await admin_call(api, "PUT", f"/api/variables/{name}", {"value": value, "secret": True})
    headers = {"X-Token": "{{ vars.pw }}"}  # a header value is ASCII: not q
    query = "password={{ vars.pw }}&q={{ vars.q }}"
    definitions = {
        # succeeds: the result holds the URL, the answer's headers and its echoed body
        "echoed": {"url": f"{echo}/echo?{query}", "headers": headers},
        # fails: the error names the URL and quotes the body
        "refused": {"url": f"{echo}/status/500?{query}", "headers": headers},
        # the user-info of the URL: percent-encoded by the parser
        "userinfo": {"url": f"http://user:{{{{ vars.q }}}}@{echo.removeprefix('http://')}/echo"},
        # a user-info the parser splits at the secret's "@": the error names the pieces
        "split": {"url": f"http://user:{{{{ vars.pw }}}}@{echo.removeprefix('http://')}/echo"},
        # the host: lower-cased by the parser, named by the resolver's error
        "host": {"url": "http://{{ vars.host }}.invalid/echo?q={{ vars.q }}"},
    }
    jobs = {}
    for name, http in definitions.items():
        created = await admin_call(
            api,
            "POST",
            "/api/definitions",
            {"name": name, "kind": "http", "http": http, "retry": {"max_attempts": 1}},
        )
        jobs[name] = await run(api, created["id"])
    states = {name: (await api.app.get_job_async(job)).state for name, job in jobs.items()}
    assert states == {
        "echoed": JobState.SUCCEEDED,
        "refused": JobState.DEAD_LETTER,
        "userinfo": JobState.SUCCEEDED,
        "split": JobState.DEAD_LETTER,
        "host": JobState.DEAD_LETTER,
    }
    echoed = await api.app.get_job_async(jobs["echoed"])
    assert echoed.result["url"] == f"{echo}/echo?password=***&q=***", echoed.result["url"]
    seen: dict[str, str] = {}
    for name, job_id in jobs.items():
        seen |= {
            f"{name}: {where}": text for where, text in (await viewer_reads(api, job_id)).items()
        }
    seen["the server log"] = server_log.getvalue()
    assert "attempt finished" in seen["the server log"]
    assert_no_leak(seen)


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs Debian's python3")
async def test_no_form_of_a_secret_a_script_printed_reaches_a_viewer_or_the_log(
    api: Api, server_log: io.StringIO
) -> None:
    for name, value in (("pw", PASSWORD_SECRET), ("host", HOST_SECRET), ("q", QUOTE_SECRET)):
        await admin_call(api, "PUT", f"/api/variables/{name}", {"value": value, "secret": True})
    source = (
        "import json, os, sys, urllib.parse as u\n"
        "for name in ('pw', 'host', 'q'):\n"
        "    s = os.environ[name]\n"
        "    for out in (sys.stdout, sys.stderr):\n"
        "        print(u.quote(s), u.quote_plus(s), u.quote(s, safe='@#:/'), s.lower(), file=out)\n"
        "        print(json.dumps(s), json.dumps([s], ensure_ascii=False), repr(s), file=out)\n"
        "        print(repr(s.encode()), repr(json.dumps(s)), u.quote(s).lower(), file=out)\n"
    )
    seen: dict[str, str] = {}
    for name, end, state in (
        ("printed", "", JobState.SUCCEEDED),
        ("failed", "sys.exit(3)\n", JobState.DEAD_LETTER),
    ):
        created = await admin_call(
            api,
            "POST",
            "/api/definitions",
            {
                "name": name,
                "kind": "script",
                "script": {
                    "language": "python",
                    "source": source + end,
                    "variables": ["pw", "host", "q"],
                },
                "retry": {"max_attempts": 1},
            },
        )
        job_id = await run(api, created["id"])
        job = await api.app.get_job_async(job_id)
        assert job.state is state, job.error
        shown = job.result["stdout"] if job.error is None else job.error.message
        assert shown.count("***") >= 3 * 7, shown
        seen |= {
            f"{name}: {where}": text for where, text in (await viewer_reads(api, job_id)).items()
        }
    seen["the server log"] = server_log.getvalue()
    assert_no_leak(seen)


async def test_a_secret_shorter_than_masking_needs_is_refused_naming_the_field(api: Api) -> None:
    from .api_support import problem

    admin = api.headers(Role.ADMIN)
    short = await api.client.put(
        "/api/variables/pin", json={"value": "s3cr3t!", "secret": True}, headers=admin
    )
    refused = problem(short, 400)
    assert refused["field"] == "value" and "8 characters" in refused["detail"]
    assert "s3cr3t!" not in short.text
    plain = await api.client.put("/api/variables/pin", json={"value": "s3cr3t!"}, headers=admin)
    assert plain.status_code == 200  # not a secret: shown as it is, never masked
    long_enough = await api.client.put(
        "/api/variables/pin", json={"value": "s3cr3t!!", "secret": True}, headers=admin
    )
    assert long_enough.status_code == 200 and long_enough.json()["value"] is None
