"""The API's front door, before any route code: request bodies are bounded (413), and a body
sent to a route that needs a token without a valid one is refused (401) before it is read.

A route's body is read here in full (at most ``api.max_body_bytes``; at most
:data:`PUBLIC_BODY_BYTES` for the routes that take no token, whose bodies are a few fields)
and handed on, so nothing later can be made to read or parse more. The bodies being read at
any moment hold at most ``budget`` bytes in all: past it a request is answered 503 at once,
so many slow or stalled uploads cannot fill the process's memory. A bearer token is checked
here as far as it can be without the database (an access token's signature and claims);
requests without a body pass untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.paths import route_path
from tickwork.api.problems import problem
from tickwork.errors import AuthError

PARAMETER = re.compile(r"\\\{[a-z_]+\\\}")
"""A path parameter in a route's template, as re.escape leaves it."""
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PUBLIC_BODY_BYTES = 64 * 1024
"""Largest body of a route that takes no token (login, refresh, logout, accepting an invite,
a webhook's call)."""
BODY_BUDGET_BYTES = 64 * 1024 * 1024
"""Bytes of request bodies the process holds while reading them, all requests together."""


class Gate:
    """ASGI middleware: body size limit and the anonymous-body check."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        public: Collection[tuple[str, str]],
        check_token: Callable[[str], object],
        budget: int = BODY_BUDGET_BYTES,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.public = frozenset(r for r in public if "{" not in r[1])
        """(method, path) of the routes that take no token and have no path parameters."""
        self.public_templates = [
            (method, re.compile("^" + PARAMETER.sub("[^/]+", re.escape(path)) + "$"))
            for method, path in public
            if "{" in path
        ]
        """The public routes with path parameters (a webhook's), as patterns."""
        self.check_token = check_token
        """Raises :class:`AuthError` for a token that cannot be good (no database asked)."""
        self.budget = budget
        self.reading = 0
        """Bytes of bodies being read right now."""

    def _public(self, method: str, path: str) -> bool:
        if (method, path) in self.public:
            return True
        return any(m == method and p.match(path) for m, p in self.public_templates)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope["headers"]}
        # the path as the routes see it: a mount's prefix (root_path) taken off
        public = self._public(scope["method"], route_path(scope))
        limit = min(self.max_body_bytes, PUBLIC_BODY_BYTES) if public else self.max_body_bytes
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._too_large(scope, receive, send, limit)
            return
        if not public and not self._token_may_be_good(headers.get(b"authorization", b"")):
            response = problem(
                401,
                "Not authenticated",
                "a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                self.reading += len(chunk)
                if size > limit:
                    await self._too_large(scope, receive, send, limit)
                    return
                if self.reading > self.budget:
                    await problem(
                        503,
                        "Too many requests being read",
                        "the server is reading too many request bodies at once; retry shortly",
                        headers={"Retry-After": "1", "Connection": "close"},
                    )(scope, receive, send)
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
        finally:
            self.reading -= size
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect

        await self.app(scope, replay, send)

    def _token_may_be_good(self, authorization: bytes) -> bool:
        scheme, _, token = authorization.partition(b" ")
        text = token.strip().decode("latin-1")
        if scheme.lower() != b"bearer" or not text:
            return False
        try:
            self.check_token(text)
        except AuthError:
            return False
        return True

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem(
            413,
            "Request body too large",
            f"this request's body may be at most {limit:,} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)
