"""The MCP server: the tools over Streamable HTTP at ``/mcp`` (``serve``'s ``mcp`` role), or
over stdio for a desktop assistant (``tickwork mcp --stdio``), built with the official
``mcp`` SDK.

Over HTTP, each request carries a person's API token as a bearer token (checked by the
SDK's bearer middleware against the same service as the REST API: 401 without one, whose
``WWW-Authenticate`` says tickwork takes a bearer token and does not do OAuth, as do the
404s of the paths an OAuth client probes, ``/.well-known/oauth-*``, ``/register``...); the
Host and Origin headers are checked against ``mcp.allowed_hosts``/``allowed_origins``
(DNS rebinding), bodies are bounded by ``api.max_body_bytes``, and one token may make
``mcp.rate`` requests a minute per process (429 beyond). The endpoint is stateless (each
request stands alone), so any process of a fleet can answer any request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork import __version__
from tickwork.api.deadline import Deadline
from tickwork.api.throttle import Limiter
from tickwork.app import App
from tickwork.auth import AuthService
from tickwork.config import Settings
from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.errors import AuthError, ConfigError, DatabaseError
from tickwork.limits import MAX_JSON_DEPTH, cut, too_deep
from tickwork.mcp import protocol
from tickwork.mcp.bridge import Bridge
from tickwork.mcp.tools import register
from tickwork.web.pages import NO_OAUTH, oauth_probe

MCP_PATH = "/mcp"
INSTRUCTIONS = (
    "tickwork runs background jobs, schedules and signals on PostgreSQL. These tools read and "
    "operate it with the powers of the person whose API token you hold: a VIEWER's token reads,"
    " an OPERATOR's also retries, cancels, deletes, enqueues and pauses, an ADMIN's also"
    " handles signals."
    " Every change is recorded in the audit trail as made through MCP. Ask before changing "
    "anything."
)


_checked: ContextVar[AccessToken | None] = ContextVar("tickwork_mcp_checked", default=None)
"""The token :class:`Endpoint` checked for this request (so the SDK's check costs nothing)."""
OUTAGE: tuple[type[BaseException], ...] = (DatabaseError, *CONNECTION_ERRORS)
"""What checking a token meets when the database is out of reach (503, not a 401 or 500)."""


async def _check(auth: AuthService, token: str) -> AccessToken | None:
    """The SDK's view of a token the REST API would take; None for one it would refuse."""
    try:
        principal = await auth.authenticate(token)
    except AuthError:
        return None
    return AccessToken(
        token=token, client_id=principal.actor, scopes=[], subject=str(principal.user_id)
    )


class _Verifier:
    """The SDK's token check: the token must authenticate as the REST API would take it."""

    def __init__(self, auth: AuthService) -> None:
        self.auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        found = _checked.get()
        if found is not None and found.token == token:
            return found
        return await _check(self.auth, token)


def _http_token() -> str:
    found = get_access_token()
    if found is None:  # the bearer middleware lets no request through without one
        raise AuthError("a bearer token is required")
    return found.token


MAX_SDK_LOG = 500
"""Characters of an SDK log message that are kept: some quote a whole client message."""
log = logging.getLogger("tickwork.mcp")


class _LibraryLog(logging.Handler):
    """Other libraries' warnings and errors (the SDK's first: it logs what clients send, some
    of it on the root logger) as tickwork's own log lines, each cut to :data:`MAX_SDK_LOG`
    characters: a client cannot fill the log by what it sends."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("tickwork"):
            return  # tickwork's own lines have their handler (and do not reach the root)
        detail = cut(record.getMessage(), MAX_SDK_LOG)
        log.log(record.levelno, "library log", extra={"logger": record.name, "detail": detail})


def _route_sdk_logs() -> None:
    """The SDK's loggers, and the root logger (so ``logging.warning()`` finds a handler and
    installs no bare one of its own), through :class:`_LibraryLog`."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _LibraryLog) for h in sdk.handlers):
        sdk.addHandler(_LibraryLog(logging.WARNING))
    sdk.setLevel(logging.WARNING)
    sdk.propagate = False
    root = logging.getLogger()
    if not any(isinstance(h, _LibraryLog) for h in root.handlers):
        root.addHandler(_LibraryLog(logging.WARNING))


def build(
    settings: Settings, bridge: Bridge, token: Callable[[], str], auth: AuthService | None
) -> FastMCP:
    """The server with every tool; each calls the API through ``bridge`` with ``token()``.
    With ``auth`` (HTTP), requests must carry a token ``auth`` accepts."""

    async def call(method: str, path: str, **kwargs: Any) -> Any:
        return await bridge.call(token(), method, path, **kwargs)

    public = settings.api.public_url or f"http://{settings.api.host}:{settings.api.port}"
    root = logging.getLogger()
    handlers = list(root.handlers)
    server = FastMCP(
        "tickwork",
        instructions=INSTRUCTIONS,
        token_verifier=None if auth is None else _Verifier(auth),
        auth=None if auth is None else AuthSettings(issuer_url=public, resource_server_url=None),
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.mcp.max_body_bytes,
        transport_security=security(settings),
        log_level="WARNING",
    )
    root.handlers = handlers  # the SDK configures the root logger; tickwork's logs stay its own
    # initialize's serverInfo.version: tickwork's, not the SDK's (its default; FastMCP takes
    # no version of its own)
    server._mcp_server.version = __version__
    _route_sdk_logs()
    register(server, call)
    protocol.install(server)
    return server


def security(settings: Settings) -> TransportSecuritySettings:
    """The Host and Origin allow-lists, with ``api.public_url``'s added."""
    hosts = list(settings.mcp.allowed_hosts)
    origins = list(settings.mcp.allowed_origins)
    if settings.api.public_url:
        parts = urlsplit(settings.api.public_url)
        if not parts.scheme or not parts.netloc:
            raise ConfigError(f"api.public_url ({settings.api.public_url!r}) must be a URL")
        hosts.append(parts.netloc)
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class Endpoint:
    """``/mcp`` in front of another app (the API, or nothing when ``mcp`` runs alone).

    The paths where an OAuth client looks for an authorization server are 404s, whatever
    the method, saying tickwork takes a bearer token (:data:`~tickwork.web.pages.NO_OAUTH`).
    Before the SDK sees a request: only ``POST /mcp`` is served (a stateless endpoint has no
    stream to offer: GET is 405); the Host and Origin headers must be allowed; the bearer
    token must authenticate (else 401, before any body is read; refusals are counted per
    address); one person makes at most ``mcp.rate`` requests a minute; the body must be
    UTF-8, at most ``api.max_body_bytes`` and nested at most 64 deep. The whole request
    answers within ``api.request_deadline`` (503 past it, as the REST API's)."""

    def __init__(
        self, server: FastMCP, settings: Settings, auth: AuthService, rest: ASGIApp | None
    ) -> None:
        self.server = server
        self.auth = auth
        self.mcp = server.streamable_http_app()
        self.rest = rest
        self.limiter = Limiter(settings.mcp.rate)
        self.refused = Limiter(settings.mcp.rate)
        self.max_body = settings.mcp.max_body_bytes
        self.allowed = security(settings)
        self.bounded = Deadline(self._serve, seconds=settings.api.request_deadline)
        """A request to ``/mcp`` answers within ``api.request_deadline`` (503 past it), as the
        REST API's do: its token is checked against the database before any tool runs."""

    def lifespan(self) -> Any:
        """Held while serving: the SDK's session manager runs inside it."""
        return self.server.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and oauth_probe(path):
            # whatever the method (an OAuth client POSTs to /register and /token): the
            # client learns at once that there is no authorization server to find here
            await _answer(send, *_problem(404, "Not Found", NO_OAUTH))
            return
        if scope["type"] != "http" or (path != MCP_PATH and not path.startswith(MCP_PATH + "/")):
            if self.rest is None:
                await _answer(send, *_problem(404, "Not Found", "no such route"))
                return
            await self.rest(scope, receive, send)
            return
        await self.bounded(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request to ``/mcp``: refused, or the SDK's to answer."""
        refusal = await self._refusal(scope)
        if refusal is None and scope.get("method") == "POST":
            try:
                body = await _body(receive, self.max_body)
            except _Gone:
                return  # nothing of a body cut short runs
            except TimeoutError:
                body, refusal = None, _problem(408, "Request Timeout", "the body came too slowly")
            else:
                refusal = await _body_refusal(body, self.max_body)
            if refusal is None and body is not None:
                receive = _replay(body, receive)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        await self.mcp(scope, receive, send)

    async def _refusal(self, scope: Scope) -> Refusal | None:
        """Why a request is answered before its body is read; None: read on."""
        if scope["path"] != MCP_PATH:
            return _problem(404, "Not Found", f"the MCP endpoint is {MCP_PATH}")
        if scope.get("method") != "POST":
            return (*_problem(405, "Method Not Allowed", "POST JSON-RPC messages"), ALLOW_POST)
        pairs = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = dict(pairs)
        if sum(name == "authorization" for name, _ in pairs) > 1:
            return _problem(400, "Bad Request", "one Authorization header, not several")
        if not _allowed(headers.get("host", ""), self.allowed.allowed_hosts):
            return _problem(
                421, "Misdirected Request", "this Host is not served (mcp.allowed_hosts)"
            )
        origin = headers.get("origin")
        if origin is not None and not _allowed(origin, self.allowed.allowed_origins):
            return _problem(403, "Forbidden", "requests from this Origin are refused")
        token = _bearer(headers.get("authorization", ""))
        try:
            checked = None if token is None else await _check(self.auth, token)
        except OUTAGE:
            problem = _problem(503, "Database unavailable", "the database is out of reach")
            return (*problem, RETRY_SOON)
        if checked is None:
            # a client sending refused tokens is told to back off (a valid token from the
            # same address is never held back by it: assistants often share 127.0.0.1)
            wait = self.refused.wait((scope.get("client") or ("-", 0))[0])
            if wait > 0:
                return _throttled(wait, "too many refused tokens from this address")
            return (*_problem(401, "Unauthorized", BEARER_ONLY), _ask_bearer(token is not None))
        _checked.set(checked)
        wait = self.limiter.wait(checked.subject)
        if wait > 0:
            return _throttled(wait, "this person made too many MCP requests")
        return None


Refusal = tuple[int, dict[str, Any]] | tuple[int, dict[str, Any], Sequence[tuple[bytes, bytes]]]
"""A status, its problem detail, and headers to send with it."""
ALLOW_POST = [(b"allow", b"POST")]
BEARER_ONLY = "a personal API token is required as a bearer token; tickwork does not do OAuth"
"""What a 401 of /mcp says, in its problem detail and its WWW-Authenticate header."""


def _ask_bearer(sent: bool) -> list[tuple[bytes, bytes]]:
    """The 401's challenge (RFC 6750 section 3): the realm, and what to send in its
    ``error_description``. A token that was sent and refused is ``invalid_token``; a request
    without one has no error code (the RFC's section 3.1: its client may not have known one
    was needed)."""
    error = 'error="invalid_token", ' if sent else ""
    challenge = f'Bearer realm="tickwork", {error}error_description="{BEARER_ONLY}"'
    return [(b"www-authenticate", challenge.encode())]


RETRY_SOON = [(b"retry-after", b"5")]


def _problem(status: int, title: str, detail: str) -> tuple[int, dict[str, Any]]:
    return status, {"status": status, "title": title, "detail": detail}


def _throttled(wait: float, why: str) -> Refusal:
    seconds = math.ceil(wait)
    problem = _problem(429, "Too Many Requests", f"{why}; retry in {seconds} s")
    return (*problem, [(b"retry-after", str(seconds).encode())])


def _allowed(value: str, patterns: Sequence[str]) -> bool:
    """``value`` is one of ``patterns``, or matches a ``name:*`` one with a port of digits."""
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-1]  # "name:"
            port = value[len(base) :]
            if value.startswith(base) and port.isascii() and port.isdigit() and len(port) <= 5:
                return True
    return False


BODY_SECONDS = 10.0
"""Seconds a client has to send its whole body (408 after): a slow body holds nothing long."""
MAX_VALUES = 10_000
"""Arrays and objects one body may hold: an MCP message holds a few (parsing a flood of
small ones costs seconds of the event loop, which every request and lease shares)."""


class _Gone(Exception):
    """The client left before its body was whole: nothing of it runs."""


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's whole body, or None once it is past ``limit`` bytes (the rest is not
    read); :class:`_Gone` when the client leaves before it is whole, TimeoutError past
    :data:`BODY_SECONDS`."""
    chunks: list[bytes] = []
    size = 0
    async with asyncio.timeout(BODY_SECONDS):
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _body_refusal(body: bytes | None, limit: int) -> Refusal | None:
    """Why a body is refused before the SDK parses it: too large, not UTF-8 JSON (a NUL
    byte: UTF-16 or UTF-32, which the SDK's parser would take), too many values, nested
    deeper than :data:`~tickwork.limits.MAX_JSON_DEPTH`, or JSON Python will not parse (a
    4,301-digit number). Parsed off the event loop when it is not small."""
    if body is None:
        return _problem(413, "Content Too Large", f"the body is over {limit} bytes")
    if b"\x00" in body:
        return _problem(400, "Bad Request", "the body is not UTF-8 JSON")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _problem(400, "Bad Request", f"the body is not UTF-8 (byte {exc.start})")
    containers = body.count(b"[") + body.count(b"{")
    if containers > MAX_VALUES:
        return _problem(400, "Bad Request", f"the body holds over {MAX_VALUES} arrays and objects")
    small = len(body) <= 4096
    refusal = _json_refusal(body) if small else await asyncio.to_thread(_json_refusal, body)
    return None if refusal is None else _problem(400, "Bad Request", refusal)


def _json_refusal(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except RecursionError:
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:
        return f"the body is not JSON Python parses ({str(exc)[:100]})"
    if too_deep(value):
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the body read over again, then the client's own messages
    (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _bearer(header: str) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if it holds one."""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _answer(
    send: Send, status: int, problem: dict[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(problem).encode()
    # closed after a refusal: a body left unread is not drained, a slow client holds nothing
    headers = [(b"content-type", b"application/problem+json"), (b"connection", b"close"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_endpoint(
    settings: Settings, auth: AuthService, rest_api: ASGIApp, served: ASGIApp | None
) -> Endpoint:
    """``/mcp`` over HTTP, calling ``rest_api`` in process, in front of ``served``."""
    server = build(settings, Bridge(rest_api), _http_token, auth)
    return Endpoint(server, settings, auth, served)


async def run_stdio(app: App, token: str) -> None:
    """The tools over stdin/stdout for one person's ``token`` (checked first: a refused token
    stops here, named), calling the API in this process on ``app``'s database."""
    from tickwork.api import create_api

    pool = await app.db.async_pool()
    auth = AuthService(pool, app.db.store, app.settings.auth)
    await auth.start()
    await auth.authenticate(token)
    bridge = Bridge(create_api(app, auth, pool))
    try:
        await build(app.settings, bridge, lambda: token, None).run_stdio_async()
    finally:
        await bridge.aclose()
        await app.aclose()
