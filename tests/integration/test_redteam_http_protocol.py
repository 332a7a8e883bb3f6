"""Red team, round two, against what HTTP's protocol work added (HEAD, OPTIONS, Allow,
compression, 415, JSON syntax errors): hostile paths, methods and headers. What held is kept
as a test; the one that broke (a 405 with an empty Allow for a path no route takes) too."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tickwork import App
from tickwork.api import create_api
from tickwork.api.compression import accepts_gzip
from tickwork.auth import Role

from .api_support import BASE_URL, Api, problem, start_api

SECRET_IN_BODY = "hunter2-correct-horse"


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    async for found in start_api(app):
        yield found


@pytest.mark.parametrize("method", ["PUT", "POST", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/api/nonexistent", "/api/jobs/1/nothing", "/api/jobs//retry"])
async def test_a_path_no_route_takes_is_404_for_every_method_not_a_405_allowing_nothing(
    api: Api, method: str, path: str
) -> None:
    answer = await api.client.request(method, path, headers=api.headers(Role.ADMIN))
    problem(answer, 404)
    assert "allow" not in answer.headers


@pytest.mark.parametrize(
    "path",
    [
        "/api/x'<script>alert(1)</script>",
        "/api/" + "a/" * 2000,
        "/api/%00%ff",
        "/api/jobs/1%2f..%2f",
    ],
)
async def test_options_on_a_hostile_path_is_a_json_404_or_the_routes_allow(
    api: Api, path: str
) -> None:
    answer = await api.client.options(path)
    assert answer.status_code in (204, 404)
    if answer.status_code == 404:
        assert answer.headers["content-type"] == "application/problem+json"
    assert not [h for h in answer.headers if h.startswith("access-control-")]


async def test_head_and_options_give_an_anonymous_caller_nothing_a_get_would_not(api: Api) -> None:
    for path in ("/api/jobs", "/api/users", "/api/variables", "/api/audit", "/api/events"):
        head = await api.client.head(path)
        assert head.status_code == 401 and head.content == b""
        options = await api.client.options(path)
        assert options.status_code == 204 and options.content == b""
        assert set(options.headers) <= {"allow", "cache-control", "content-length", "date"}


@pytest.mark.parametrize(
    ("header", "takes"),
    [
        ("gzip;q=nan", False),
        ("gzip;q=-1", False),
        ("gzip;q=1e-400", False),
        ("gzip;q=0, *", False),
        ("gzip;q=inf", True),
        ("a," * 4000 + "gzip", True),
        (";;;,,,=;q=;", False),
        ("gzip;q=0.001", True),
    ],
)
def test_hostile_accept_encoding_headers_are_read_without_error(header: str, takes: bool) -> None:
    assert accepts_gzip(header) is takes


async def test_a_huge_accept_encoding_is_answered(api: Api) -> None:
    answer = await api.client.get("/api/openapi.json", headers={"Accept-Encoding": "x," * 3000})
    assert answer.status_code == 200 and "content-encoding" not in answer.headers


async def test_errors_about_a_body_never_echo_it(api: Api) -> None:
    headers = api.headers(Role.OPERATOR) | {"Content-Type": "application/json"}
    broken = '{"task": "tests.x", "args": {"password": "' + SECRET_IN_BODY + '"'
    for body in (broken, broken + ", }", broken.encode("utf-16"), b"\xff" + broken.encode()):
        content = body if isinstance(body, bytes) else body.encode()
        answer = await api.client.post("/api/jobs", content=content, headers=headers)
        assert answer.status_code == 400, answer.text
        assert SECRET_IN_BODY not in answer.text
    plain = api.headers(Role.OPERATOR) | {"Content-Type": "text/plain; x=" + "A" * 10_000}
    answer = await api.client.post("/api/jobs", content=broken.encode(), headers=plain)
    body = problem(answer, 415)
    assert SECRET_IN_BODY not in answer.text and len(body["detail"]) < 300


@pytest.mark.parametrize(
    "origin",
    [
        "https://ops.example.com.evil.example",
        "https://evilops.example.com",
        "http://ops.example.com",  # the scheme downgraded
        "https://ops.example.com:8443",
        "https://OPS.example.com",
        "null",
        "https://ops.example.com\t",
    ],
)
async def test_cors_takes_a_listed_origin_exactly_and_nothing_like_it(
    app: App, api: Api, origin: str
) -> None:
    app.settings.api.cors_origins = ["https://ops.example.com"]
    cors = create_api(app, api.auth, await app.db.async_pool())
    transport = httpx.ASGITransport(app=cors)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        asked = {"Origin": origin, "Access-Control-Request-Method": "DELETE"}
        preflight = await client.options("/api/jobs/1", headers=asked)
        read = await client.get("/api/jobs", headers={"Origin": origin} | api.headers(Role.ADMIN))
    for answer in (preflight, read):
        assert "access-control-allow-origin" not in answer.headers
        assert "access-control-allow-credentials" not in answer.headers
