"""The API's front door, before any route code: request bodies are bounded (413) and a body
sent to a route that needs a token, without one, is refused (401) before it is read.

A route's body is read here in full (it is at most ``api.max_body_bytes``) and handed on, so
nothing later can be made to read or parse more. Requests without a body pass untouched.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.problems import problem

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Gate:
    """ASGI middleware: body size limit and the anonymous-body check."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, public: Collection[tuple[str, str]]
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.public = frozenset(public)
        """(method, path) of the routes that take no token (their paths have no parameters)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope["headers"]}
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._too_large(scope, receive, send)
            return
        if (scope["method"], scope["path"]) not in self.public and not _has_bearer(
            headers.get(b"authorization", b"")
        ):
            response = problem(
                401,
                "Not authenticated",
                "a bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413,
            "Request body too large",
            f"a request body may be at most {self.max_body_bytes:,} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _has_bearer(authorization: bytes) -> bool:
    scheme, _, token = authorization.partition(b" ")
    return scheme.lower() == b"bearer" and bool(token.strip())
