"""The interactive API docs (Swagger UI) at ``/api/docs``.

Swagger UI's script, stylesheet and icon are served from the installed ``fastapi-offline``
package (its copy of swagger-ui-dist) instead of a CDN, so the page works on a machine with
no internet access: nothing it loads comes from another host.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources

from fastapi import FastAPI, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from tickwork.api.paths import mounted_at
from tickwork.api.policy import CSP, HEADERS
from tickwork.errors import NotFoundError

INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
"""A script written in the page (Swagger UI's start-up), allowed by its hash."""

OPENAPI_PATH = "/api/openapi.json"
DOCS_PATH = "/api/docs"
ASSETS_PATH = "/api/docs/assets"
ASSETS_PACKAGE = "fastapi_offline"
"""The installed package whose ``static/`` folder holds Swagger UI's files."""
ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}
"""The files the docs page loads, with their content types; no other name is served."""
ASSET_MAX_AGE = 86_400
"""Seconds a browser may keep an asset without asking again (they change only on upgrade)."""


def install(api: FastAPI) -> None:
    """Add the docs' routes, public and left out of the OpenAPI document, to the app itself
    (not through a router: the route table's check finds a route the document leaves out
    only there)."""
    for path, endpoint in (
        (DOCS_PATH, docs),
        (ASSETS_PATH + "/{name}", asset),
    ):
        api.add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)


async def docs(request: Request) -> HTMLResponse:
    """Swagger UI on the OpenAPI document, every file it loads served by this API, with the
    dashboard's security headers: its one inline script allowed by its hash, nothing else."""
    page = _swagger_page(mounted_at(request.scope))
    inline = [m.group(1) for m in INLINE_SCRIPT.finditer(bytes(page.body).decode())]
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()}'"
        for code in inline
    )
    policy = CSP.replace("script-src 'self'", f"script-src 'self' {hashes}").replace(
        "style-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # Swagger UI styles inline
    )
    page.headers.update({**HEADERS, "Content-Security-Policy": policy})
    return page


def _swagger_page(prefix: str) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=prefix + OPENAPI_PATH,
        title="tickwork API",
        swagger_js_url=f"{prefix}{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{prefix}{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{prefix}{ASSETS_PATH}/favicon.png",
        oauth2_redirect_url=None,  # bearer tokens only: no OAuth2 flow to return from
        # no badge from the public validator service, which would be sent the document
        swagger_ui_parameters={"validatorUrl": None},
    )


async def asset(name: str) -> Response:
    """One of :data:`ASSETS`."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFoundError("docs asset", name)
    return Response(
        _read(name),
        media_type=media_type,
        headers={"Cache-Control": f"public, max-age={ASSET_MAX_AGE}"},
    )


@cache
def _read(name: str) -> bytes:
    return resources.files(ASSETS_PACKAGE).joinpath("static", name).read_bytes()
