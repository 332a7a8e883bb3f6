"""The dashboard: the single-page app of ``ui/``, built into ``web/dist`` (committed, and
checked against its sources in CI), served by every full API at ``/`` - or under the path a
host application mounts it at (the ASGI ``root_path``: ``/tickwork/``, say).

- ``/assets/<name>``: the built files. Their names carry a hash of their content, so a
  browser may keep them for a year without asking again (``immutable``).
- The app's pages (``/``, ``/jobs/42``, ...: the paths of its router, :mod:`.pages`):
  ``index.html``, which the app's router turns into the page; never cached without asking
  (``no-cache``), so a new release is picked up at the next load.
- Every other path is a 404: a problem detail, or for a browser asking for a page
  (``Accept: text/html``) the same ``index.html``, which shows "No such page". Under
  ``/api/``, ``/assets/``, ``/mcp`` and ``/.well-known/``, and where an OAuth client looks
  for an authorization server (``/register``, ``/authorize``, ``/token``), it is always a
  problem detail (the last saying tickwork takes a bearer token and does not do OAuth).
- Every page carries a Content-Security-Policy that lets it load and connect to this
  server only: no inline script or style, no other origin, no framing.
- The same build serves any mount path: its page names its files relatively
  (``./assets/...``, Vite's ``base: './'``) and the page is sent with them made absolute
  under the mount path, which it also carries in ``<meta name="tickwork-base">`` for the app
  to address its API and its routes by (no inline script, no ``<base>``: the policy allows
  neither). The files load the app's other files relative to their own URL.

Nothing here needs Node.js: ``pip install`` ships the built files.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from fastapi import FastAPI, Request, Response

from tickwork.api.compression import accepts_gzip
from tickwork.api.paths import CATCH_ALL, mounted_at, route_path
from tickwork.api.policy import CSP as CSP  # re-exported: the policy the pages carry
from tickwork.api.policy import HEADERS
from tickwork.api.problems import problem
from tickwork.errors import NotFoundError
from tickwork.web.pages import NO_OAUTH, is_page, never_page, oauth_probe

DIST_PACKAGE = "tickwork.web"
ASSET_CACHE = "public, max-age=31536000, immutable"
PAGE_CACHE = "no-cache"
MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
}
NOT_BUILT = (
    "<!doctype html><title>tickwork</title><p>The dashboard is not built in this copy of"
    " tickwork: run <code>npm ci &amp;&amp; npm run build</code> in <code>ui/</code>, or"
    " install a release. The API is at <a href='{at}/api/docs'>{at}/api/docs</a>.</p>"
)
RELATIVE_FILES = b'="./assets/'
"""How the built page names its files (``src="./assets/index-....js"``)."""
BASE_META = b'<meta name="tickwork-base" content="" />'
"""The built page's placeholder for the path it is served under (ui/index.html)."""


def install(api: FastAPI) -> None:
    """Add the dashboard's routes, public and left out of the OpenAPI document, after every
    other route (the last one answers any other GET path with the app's page)."""
    api.add_api_route("/assets/{name}", asset, methods=["GET"], include_in_schema=False)
    api.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    api.add_api_route(CATCH_ALL, page, methods=["GET"], include_in_schema=False)


def _dist() -> Traversable:
    return resources.files(DIST_PACKAGE).joinpath("dist")


@cache
def _asset(name: str) -> bytes | None:
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    found = _dist().joinpath("assets", name)
    return found.read_bytes() if found.is_file() else None


@cache
def _index() -> bytes | None:
    found = _dist().joinpath("index.html")
    return found.read_bytes() if found.is_file() else None


async def asset(request: Request, name: str) -> Response:
    """A built file, by its hashed name: its gzipped copy (made at build) to a client that
    accepts gzip."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    content = _asset(name) if suffix in MEDIA_TYPES else None
    if content is None:
        raise NotFoundError("dashboard file", name)
    headers = {
        "Cache-Control": ASSET_CACHE,
        "X-Content-Type-Options": "nosniff",
        "Vary": "Accept-Encoding",
    }
    packed = _asset(name + ".gz") if accepts_gzip(request.headers.get("accept-encoding")) else None
    if packed is not None:
        content = packed
        headers["Content-Encoding"] = "gzip"
    return Response(content, media_type=MEDIA_TYPES[suffix], headers=headers)


async def page(request: Request) -> Response:
    """The app's page at a path of the dashboard (its router shows the right one); a 404
    elsewhere (the page, which says "No such page", to a browser asking for one)."""
    path = route_path(request.scope)  # below the mount path
    if is_page(path):
        return _page(request, 200)
    if oauth_probe(path):
        return problem(404, "Not found", NO_OAUTH)
    if never_page(path) or "text/html" not in request.headers.get("accept", ""):
        raise NotFoundError("route", path)
    return _page(request, 404)


def _page(request: Request, status: int) -> Response:
    return Response(
        served_page(_index(), mounted_at(request.scope)),
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers={"Cache-Control": PAGE_CACHE, **HEADERS},
    )


def served_page(built: bytes | None, at_path: str) -> bytes:
    """The built page as served under ``at_path`` (``""`` or ``/tickwork``, percent-encoded:
    :func:`tickwork.api.paths.mounted_at`): its files' addresses made absolute under it, and
    it named in the page's ``tickwork-base`` meta."""
    at = html.escape(at_path, quote=True)  # percent-encoded already: this is a second guard
    if built is None:
        return NOT_BUILT.format(at=at).encode()
    base = f'<meta name="tickwork-base" content="{at}" />'.encode()
    return built.replace(RELATIVE_FILES, f'="{at}/assets/'.encode()).replace(BASE_META, base)
