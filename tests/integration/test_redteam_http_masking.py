"""Red team, round two: an HTTP definition whose secret (holding ``&``, ``<`` and a quote)
goes out in its URL and header, answered by a server that echoes the request in an HTML
error page, in a redirect's Location and in its headers: what the run stores shows none of
it (the answer's body, headers, URL and redirects, and the error's message)."""

from __future__ import annotations

import html
import ipaddress
from urllib.parse import quote

import httpx
import pytest

from tickwork.config import HttpRuntimeSettings
from tickwork.definitions.templates import Variables
from tickwork.errors import RunFailed
from tickwork.runtimes.http import call

SECRET = "it's&<b>s3cret-value"
SPEC = {
    "method": "GET",
    "url": "http://127.0.0.1:9/api?key={{ vars.api.key }}",
    "headers": {"X-Key": "{{ vars.api.key }}"},
    "body": None,
    "expect_status": None,
    "follow_redirects": True,
}


def echo(request: httpx.Request) -> httpx.Response:
    """A server echoing what it was sent, as real ones do in their error pages."""
    if request.url.path == "/api":
        return httpx.Response(302, headers={"Location": f"/next?{request.url.query.decode()}"})
    page = (
        f"<h1>Not Found</h1><p>{html.escape(str(request.url))}</p>"
        f"<p>key header: {html.escape(request.headers['x-key'])}</p>"
        f"<p>{''.join(f'&#{ord(c)};' for c in request.headers['x-key'])}</p>"
    )
    headers = {"X-Echo": quote(request.headers["x-key"]), "Content-Type": "text/html"}
    return httpx.Response(404, headers=headers, stream=httpx.ByteStream(page.encode()))


async def test_an_echoing_html_error_page_shows_no_secret() -> None:
    variables = Variables({"api.key": SECRET}, secrets=(SECRET,))
    with pytest.raises(RunFailed) as failed:
        await call(
            SPEC,
            exec_timeout=10,
            variables=variables,
            settings=HttpRuntimeSettings(),
            allow=[ipaddress.ip_network("127.0.0.0/8")],
            transport=httpx.MockTransport(echo),
        )
    message = str(failed.value)
    assert "404" in message and "***" in message
    for leaked in ("s3cret", html.escape(SECRET), quote(SECRET)):
        assert leaked not in message, message
