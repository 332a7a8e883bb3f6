"""What HTTP (RFC 9110) asks of every route, before the routes see a request:

- ``HEAD`` is answered on every ``GET`` route: the ``GET`` runs, its status and headers are
  sent, its body is not (an event stream is told the client left once its headers are out).
- ``OPTIONS`` answers ``204`` with ``Allow``: the methods the path takes (404 for a path no
  route takes). Without a CORS allow-list (``api.cors_origins``), it carries no CORS header,
  so a browser on another origin is refused as before, now by the browser's rule and not by
  a 405.
- A ``GET`` of an API path that only other methods take is a ``405`` (not the dashboard's
  catch-all's 404), and every ``405`` carries ``Allow``
  (:func:`tickwork.api.methods.allowed_methods`, which the problem handler uses too).
- ``Vary`` names each header once.
- An API response that sets no ``Cache-Control`` of its own gets ``no-store``: tokens,
  secrets and job data are never kept by a browser or a shared cache (RFC 6749 section 5.1
  asks it of every answer carrying a token). The dashboard's files and pages set their own.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.methods import allowed_methods
from tickwork.api.paths import route_path
from tickwork.api.problems import problem
from tickwork.web.pages import is_page

NO_STORE = (b"cache-control", b"no-store")


class Protocol:
    """ASGI middleware: ``HEAD``, ``OPTIONS`` and the default ``Cache-Control``."""

    def __init__(self, app: ASGIApp, api: Any) -> None:
        self.app = app
        self.api = api
        """The FastAPI application whose routes say what each path allows."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method == "OPTIONS":
            await self._options(scope, receive, send)
            return
        head = method == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}
        if scope["method"] == "GET" and not is_page(route_path(scope)):
            allowed = allowed_methods(self.api, scope)
            if allowed and "GET" not in allowed:  # not the dashboard's catch-all's to answer
                await problem(
                    405,
                    "Method Not Allowed",
                    "Method Not Allowed",
                    headers={"Allow": ", ".join(allowed), "Cache-Control": "no-store"},
                )(scope, receive, send)
                return
        api = route_path(scope).startswith("/api/") or route_path(scope) in (
            "/metrics",
            "/healthz",
            "/readyz",
        )
        started = False

        async def respond(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = _one_vary(list(message.get("headers", [])))
                if api and not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append(NO_STORE)
                await send({**message, "headers": headers})
                if head:  # the headers are the answer: end it now
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if head:
                return  # the body of a HEAD's GET is not sent
            await send(message)

        async def until_answered() -> Message:
            if head and started:  # a stream's headers are out: its client has what it asked
                return {"type": "http.disconnect"}
            return await receive()

        await self.app(scope, until_answered, respond)

    async def _options(self, scope: Scope, receive: Receive, send: Send) -> None:
        allowed = allowed_methods(self.api, scope)
        if not allowed:
            path = route_path(scope)
            await problem(404, "Not found", f"route {path!r} does not exist")(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 204,
                "headers": [(b"allow", ", ".join(allowed).encode()), NO_STORE],
            }
        )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _one_vary(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with their ``Vary`` values in one header, each field named once (the
    compression middleware adds ``Accept-Encoding`` to a ``Vary`` that may name it)."""
    varies = [value for name, value in headers if name.lower() == b"vary"]
    if len(varies) < 2 and not (varies and b"," in varies[0]):
        return headers
    fields: dict[bytes, bytes] = {}
    for value in varies:
        for field in value.split(b","):
            if field.strip():
                fields.setdefault(field.strip().lower(), field.strip())
    rest = [(name, value) for name, value in headers if name.lower() != b"vary"]
    return [*rest, (b"vary", b", ".join(fields.values()))]
