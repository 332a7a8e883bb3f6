"""The API docs work with no internet access, and ``/`` leads a browser to them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from tickwork import App
from tickwork.api.security import check_table

from .api_support import BASE_URL, Api, start_api

CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    async for found in start_api(app):
        yield found


class References(HTMLParser):
    """The URLs a page makes the browser load: scripts, stylesheets, icons, images."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for attribute in ("src", "href"):
            if tag in ("script", "link", "img") and found.get(attribute):
                self.urls.append(str(found[attribute]))


async def test_the_docs_page_loads_every_file_from_this_api(api: Api) -> None:
    page = await api.client.get("/api/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "http://" not in page.text and "https://" not in page.text  # no other host
    parser = References()
    parser.feed(page.text)
    spec = re.search(r"url: '([^']+)'", page.text)  # the document Swagger UI loads
    assert spec is not None
    urls = [*parser.urls, spec.group(1)]
    assert len(urls) == 4  # script, stylesheet, icon, document
    for url in urls:
        absolute = urljoin(f"{BASE_URL}/api/docs", url)
        assert urlsplit(absolute).netloc == urlsplit(BASE_URL).netloc, url
        answer = await api.client.get(absolute)
        assert answer.status_code == 200, url
        suffix = re.search(r"\.\w+$", urlsplit(absolute).path)
        expected = CONTENT_TYPES.get(suffix.group(0) if suffix else "", "application/json")
        assert answer.headers["content-type"].startswith(expected), url
        assert answer.content, url
    script = await api.client.get(urljoin(f"{BASE_URL}/api/docs", parser.urls[-1]))
    assert b"SwaggerUIBundle" in script.content  # the page's script is Swagger UI's
    # only the page's own files are served from the package, and the gate still stands
    other = await api.client.get("/api/docs/assets/redoc.standalone.js")
    assert other.status_code == 404
    assert other.headers["content-type"].startswith("application/problem+json")
    posted = await api.client.post("/api/docs/assets/swagger-ui.css", content=b"x" * 10)
    assert posted.status_code == 401  # refused before its body is read, as on any route


def test_a_route_left_out_of_the_openapi_document_still_needs_a_role(api: Api) -> None:
    @api.api.get("/api/hidden", include_in_schema=False)
    async def hidden_route() -> None:
        return None

    with pytest.raises(RuntimeError, match=r"routes without a role .*'/api/hidden'"):
        check_table(api.api)
