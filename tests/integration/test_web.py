"""The dashboard's files as the API serves them: the page for every path of the app (fresh
each load, under a strict Content-Security-Policy), the built files by hashed name (kept a
year), and nothing else: unknown API paths stay problem details, no file outside the build
is reachable."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from tickwork import App
from tickwork.auth import Role
from tickwork.web import ASSET_CACHE, CSP

from .api_support import Api, start_api


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    async for found in start_api(app):
        yield found


async def test_every_path_of_the_app_is_its_page_under_a_strict_policy(api: Api) -> None:
    for path in (
        "/",
        "/jobs",
        "/jobs/42",
        "/queues?x=1",
        "/login?next=/jobs",
        "/definitions/new",
        "/signals/3/",
        "/invite?token=x",
    ):
        answer = await api.client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["cache-control"] == "no-cache"
        assert answer.headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert b'<div id="root">' in answer.content
        # served at the root: the app addresses its API and routes from / (one build
        # serves any mount path: tests/integration/test_fastapi_mount.py)
        assert b'<meta name="tickwork-base" content="" />' in answer.content
    # the page loads only files this server has, each kept for a year
    page = (await api.client.get("/")).text
    files = re.findall(r'(?:src|href)="(/assets/[^"]+)"', page)
    assert any(f.endswith(".js") for f in files) and any(f.endswith(".css") for f in files)
    for path in files:
        answer = await api.client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["cache-control"] == ASSET_CACHE
        assert answer.content
    assert "<script>" not in page  # nothing inline: the policy would refuse it


async def test_what_is_not_a_page_is_not_answered_with_one(api: Api) -> None:
    for path in (
        "/api/nope",
        "/api/jobs/1/nope",
        "/assets/nope.js",
        "/assets/..%2Fweb%2F__init__.py",
        "/assets/.hidden.js",
        "/assets/index.html",
    ):
        answer = await api.client.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("application/problem+json"), path
    # the API's own routes are untouched by the app's catch-all
    assert (await api.client.get("/api/jobs")).status_code == 401
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    posted = await api.client.post("/jobs", content=b"x")
    assert posted.status_code in (401, 405)


async def test_the_route_table_is_served_for_the_dashboard_to_gate_its_actions(api: Api) -> None:
    answer = await api.client.get("/api/routes", headers=api.headers(Role.VIEWER))
    assert answer.status_code == 200
    table = {(r["method"], r["path"]): r["role"] for r in answer.json()}
    assert table[("POST", "/api/jobs/{job_id}/retry")] == "OPERATOR"
    assert table[("GET", "/api/jobs")] == "VIEWER"
    assert table[("GET", "/api/users")] == "ADMIN"
    assert table[("POST", "/api/auth/login")] is None
    assert (await api.client.get("/api/routes")).status_code == 401
    health = await api.client.get("/api/health", headers=api.headers(Role.OPERATOR))
    assert health.status_code == 200 and isinstance(health.json()["warnings"], list)
    refused = await api.client.get("/api/health", headers=api.headers(Role.VIEWER))
    assert refused.status_code == 403  # the report names the database's sessions


async def test_a_path_that_is_no_page_is_a_404_and_no_oauth_server(api: Api) -> None:
    """An MCP (or any OAuth) client looking for an authorization server finds none, and is
    told what to send; a path of no page is a 404 for everyone, a browser shown the app's
    "No such page" with it."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/register",
        "/authorize?response_type=code&client_id=x",
        "/token",
    ):
        for headers in ({}, browser):
            answer = await api.client.get(path, headers=headers)
            assert answer.status_code == 404, path
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert "does not do OAuth" in answer.json()["detail"]
            assert "Bearer" in answer.json()["detail"]
    for path in ("/nowhere", "/jobs/42/edit", "/favicon.ico", "/.well-known/security.txt", "/mcp"):
        answer = await api.client.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("application/problem+json"), path
    # a browser asking for a page gets the app, which says "No such page", with the 404
    shown = await api.client.get("/nowhere", headers=browser)
    assert shown.status_code == 404
    assert shown.headers["content-type"].startswith("text/html")
    assert shown.headers["content-security-policy"] == CSP
    assert b'<div id="root">' in shown.content
    # ... but never for the API's, the files', MCP's or the well-known paths
    for path in ("/api/nope", "/assets/nope.js", "/mcp", "/.well-known/security.txt"):
        answer = await api.client.get(path, headers=browser)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("application/problem+json"), path
