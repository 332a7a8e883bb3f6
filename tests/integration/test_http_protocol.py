"""What HTTP asks of every route (RFC 9110, 9457, 6749), checked as monitors, browsers and
generated clients see it: HEAD on every GET route, Allow on every 405 and OPTIONS answer,
compression where it pays and never where it must not, no-store on everything the API
answers, the docs page's security headers, JSON syntax errors that say where, 415 for a
body that is not JSON, and CORS off unless an allow-list is set."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from tickwork import App
from tickwork.api import create_api
from tickwork.api.compression import accepts_gzip
from tickwork.auth import Role

from .api_support import BASE_URL, Api, email, problem, start_api

PLAIN = {"Accept-Encoding": "identity"}


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    @app.task(name="tests.echo", queue="http-tests")
    def echo(word: str = "hi") -> str:
        return word

    async for found in start_api(app):
        yield found


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/", "/jobs/42"])
async def test_head_answers_every_public_get_route_with_its_headers_and_no_body(
    api: Api, path: str
) -> None:
    got = await api.client.get(path, headers=PLAIN)
    head = await api.client.head(path, headers=PLAIN)
    assert head.status_code == got.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers.get("content-length") == got.headers.get("content-length")


async def test_head_is_authorised_as_its_get(api: Api) -> None:
    assert (await api.client.head("/api/jobs")).status_code == 401
    viewer = await api.client.head("/api/jobs", headers=api.headers(Role.VIEWER))
    assert viewer.status_code == 200 and viewer.content == b""
    assert (
        await api.client.head("/api/users", headers=api.headers(Role.VIEWER))
    ).status_code == 403


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/healthz", "GET, HEAD, OPTIONS"),
        ("DELETE", "/api/jobs", "GET, HEAD, OPTIONS, POST"),
        ("GET", "/api/jobs/bulk/cancel", "OPTIONS, POST"),
        ("POST", "/jobs/42", "GET, HEAD, OPTIONS"),  # a dashboard page
    ],
)
async def test_every_405_says_which_methods_the_path_takes(
    api: Api, method: str, path: str, allowed: str
) -> None:
    answer = await api.client.request(method, path, headers=api.headers(Role.ADMIN))
    problem(answer, 405)
    assert answer.headers["allow"] == allowed


async def test_options_answers_allow_and_no_cors_without_an_allow_list(api: Api) -> None:
    answer = await api.client.options(
        "/api/jobs",
        headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"},
    )
    assert answer.status_code == 204 and answer.content == b""
    assert answer.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert not [h for h in answer.headers if h.startswith("access-control-")]
    problem(await api.client.options("/api/no-such-thing"), 404)


async def test_cors_answers_only_the_origins_it_is_given(app: App, api: Api) -> None:
    app.settings.api.cors_origins = ["https://ops.example.com"]
    cors = create_api(app, api.auth, await app.db.async_pool())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=cors), base_url=BASE_URL) as c:
        asked = {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        }
        ours = await c.options("/api/jobs", headers={"Origin": "https://ops.example.com", **asked})
        assert ours.status_code == 200
        assert ours.headers["access-control-allow-origin"] == "https://ops.example.com"
        assert "access-control-allow-credentials" not in ours.headers
        theirs = await c.options("/api/jobs", headers={"Origin": "https://evil.example", **asked})
        assert "access-control-allow-origin" not in theirs.headers
        read = await c.get(
            "/api/jobs",
            headers={"Origin": "https://ops.example.com", **api.headers(Role.VIEWER)},
        )
        assert read.headers["access-control-allow-origin"] == "https://ops.example.com"


def test_a_cors_origin_with_a_wildcard_or_a_path_is_refused() -> None:
    from pydantic import ValidationError

    from tickwork.config import Settings

    for bad in ("*", "https://ops.example.com/", "ops.example.com", "https://*.example.com"):
        with pytest.raises(ValidationError, match=r"api\.cors_origins"):
            Settings(api={"cors_origins": [bad]})
    Settings(api={"cors_origins": ["http://localhost:5173", "https://[::1]:8443"]})


async def test_dashboard_assets_go_out_gzipped_as_built_to_a_client_that_asks(api: Api) -> None:
    page = (await api.client.get("/", headers=PLAIN)).text
    script = page.split('src="/assets/', 1)[1].split('"', 1)[0]
    plain = await api.client.get(f"/assets/{script}", headers=PLAIN)
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"
    raw = await api.client.send(
        api.client.build_request("GET", f"/assets/{script}", headers={"Accept-Encoding": "gzip"}),
        stream=True,
    )
    packed = b"".join([chunk async for chunk in raw.aiter_raw()])
    assert raw.headers["content-encoding"] == "gzip" and raw.headers["vary"] == "Accept-Encoding"
    assert gzip.decompress(packed) == plain.content
    assert len(packed) < len(plain.content) / 2
    refused = await api.client.get(f"/assets/{script}", headers={"Accept-Encoding": "gzip;q=0, br"})
    assert "content-encoding" not in refused.headers
    problem(await api.client.get(f"/assets/{script}.gz"), 404)  # only by its own name


async def test_large_json_and_metrics_are_compressed_small_answers_are_not(api: Api) -> None:
    for path in ("/metrics", "/api/openapi.json"):
        answer = await api.client.get(path, headers={"Accept-Encoding": "gzip"})
        assert answer.headers["content-encoding"] == "gzip", path
    small = await api.client.get("/healthz", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers


def test_accept_encoding_is_read_with_its_weights() -> None:
    assert accepts_gzip("gzip, deflate, br")
    assert accepts_gzip("br;q=1.0, gzip;q=0.5")
    assert accepts_gzip("*")
    assert not accepts_gzip("gzip;q=0, *")
    assert not accepts_gzip("gzip;q=0.0")
    assert not accepts_gzip("identity")
    assert not accepts_gzip(None)
    assert not accepts_gzip("gzip;q=nonsense")


async def test_everything_the_api_answers_is_no_store_tokens_first(api: Api) -> None:
    login = await api.login(email(Role.VIEWER))
    assert login.status_code == 200 and login.headers["cache-control"] == "no-store"
    refreshed = await api.client.post(
        "/api/auth/refresh", json={"refresh_token": login.json()["refresh_token"]}
    )
    assert refreshed.status_code == 200 and refreshed.headers["cache-control"] == "no-store"
    made = await api.client.post(
        "/api/me/tokens", json={"name": "ci"}, headers=api.headers(Role.VIEWER)
    )
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    for path in ("/api/jobs", "/api/me", "/metrics", "/readyz"):
        answer = await api.client.get(path, headers=api.headers(Role.ADMIN))
        assert answer.headers["cache-control"] == "no-store", path
    refused = await api.client.get("/api/jobs")
    assert refused.headers["cache-control"] == "no-store"
    # the dashboard's own caching stands: pages revalidate, hashed files are kept
    assert (await api.client.get("/")).headers["cache-control"] == "no-cache"


async def test_the_api_docs_carry_the_dashboards_security_headers(api: Api) -> None:
    docs = await api.client.get("/api/docs")
    policy = docs.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    assert (
        "script-src 'self' 'sha256-" in policy
        and "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    )
    assert docs.headers["x-content-type-options"] == "nosniff"
    assert docs.headers["referrer-policy"] == "same-origin"


async def test_a_json_syntax_error_says_where_in_the_body(api: Api) -> None:
    answer = await api.client.post(
        "/api/jobs",
        content=b'{\n  "task": "tests.echo",\n  "args": {oops}\n}',
        headers={"Content-Type": "application/json", **api.headers(Role.OPERATOR)},
    )
    body = problem(answer, 400)
    assert body["field"] == "body"
    assert "line 3, column 12 (character 37)" in body["detail"], body["detail"]
    assert "oops" not in body["detail"]  # what was sent is never echoed


async def test_a_body_that_is_not_json_is_415_naming_what_was_sent(api: Api) -> None:
    answer = await api.client.post(
        "/api/jobs",
        content=b'{"task": "tests.echo"}',
        headers={"Content-Type": "text/plain", **api.headers(Role.OPERATOR)},
    )
    body = problem(answer, 415)
    assert body["field"] == "body" and "'text/plain'" in body["detail"]
    assert answer.headers["accept"] == "application/json"
    sent = await api.client.post(
        "/api/jobs",
        content=b'{"task": "tests.echo"}',
        headers={"Content-Type": "application/json; charset=utf-8", **api.headers(Role.OPERATOR)},
    )
    assert sent.status_code == 201, sent.text
