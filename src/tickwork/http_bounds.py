"""Connection bounds of ``serve``'s HTTP server: uvicorn's h11 protocol with timers and caps.

uvicorn closes a connection only when it stays idle after a response (its keep-alive
timeout): one that connects and sends nothing, sends its headers a byte at a time or
trickles a body stays open for ever, and its ``limit_concurrency`` answers 503 to every
request, the probes included, once that many sockets are open. Here, per connection:

- its request's headers must be complete within ``header_timeout`` of its first byte (of
  the connection, for the first request), else it is closed;
- a request's body must arrive within ``body_timeout`` plus a second per ``body_min_rate``
  bytes of its data received (a chunked body's framing earns nothing), else it is answered
  408 and closed (while the server itself holds the reading back, or has not yet asked for
  an ``Expect: 100-continue`` body, the clock restarts: the client is not late);
- one client address (an IPv6 one by its /64) holds at most ``per_client`` connections, a
  trusted proxy any number; further ones are closed at once, before anything is read;
- the first ``max_connections`` connections are served; the next ``probe_reserve`` only
  for the probe paths (503 otherwise), and beyond those a new connection is closed at once.

Nothing here parses HTTP: h11 (through uvicorn) does; these are timers and counts around it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections import Counter
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from tickwork.config import ApiSettings

__all__ = ["PROBE_PATHS", "Bounds", "bounded_protocol", "probes_only"]

log = logging.getLogger("tickwork.serve")

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
"""What an orchestrator asks: served on the reserved connections and the probe port."""
PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBE_PORT_CONNECTIONS = 64
"""Connections the probe port serves at once (an orchestrator makes a few per period)."""
LINGER = 2.0
"""Seconds a connection answered 408 is still read (and what comes discarded) after its
answer, before it is closed: closing a socket with unread data resets it, and the reset can
destroy the answer before the client reads it."""
IPV6_CLIENT_PREFIX = 64
"""An IPv6 client is counted by its /64: one host is routinely handed a whole /64."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(slots=True)
class Bounds:
    """The limits of one listener, and its connections' counts (shared by its protocols)."""

    header_timeout: float
    """Seconds from a request's first byte to its complete headers."""
    body_timeout: float
    """Seconds a request body has, before ``body_min_rate`` earns more."""
    body_min_rate: int
    """Bytes received that earn the body one more second (0: none)."""
    keep_alive_timeout: float
    """Seconds a connection may be idle between requests."""
    max_connections: int
    """Connections served in full."""
    probe_reserve: int
    """Connections past ``max_connections`` that may ask only :data:`PROBE_PATHS`."""
    per_client: int
    """Connections one client address may hold (trusted proxies: any number)."""
    trusted: tuple[Network, ...] = ()
    """The trusted proxies' networks."""
    open: int = 0
    """Connections open right now (those closed at once not counted)."""
    by_client: Counter[str] = field(default_factory=Counter)
    """Connections open right now per client key."""
    refused: Counter[str] = field(default_factory=Counter)
    """Connections closed by a bound so far, by reason."""

    @classmethod
    def of(cls, api: ApiSettings) -> Bounds:
        """The API listener's bounds from the settings."""
        return cls(
            header_timeout=api.header_timeout,
            body_timeout=api.body_timeout,
            body_min_rate=api.body_min_rate,
            keep_alive_timeout=api.keep_alive_timeout,
            max_connections=api.max_connections,
            probe_reserve=api.probe_reserve,
            per_client=api.max_connections_per_client,
            trusted=tuple(ipaddress.ip_network(p, strict=False) for p in api.trusted_proxies),
        )

    @classmethod
    def probe_port(cls, api: ApiSettings) -> Bounds:
        """The probe port's bounds: the same clocks, its own few connections."""
        return cls(
            header_timeout=api.header_timeout,
            body_timeout=api.body_timeout,
            body_min_rate=api.body_min_rate,
            keep_alive_timeout=api.keep_alive_timeout,
            max_connections=PROBE_PORT_CONNECTIONS,
            probe_reserve=0,
            per_client=PROBE_PORT_CONNECTIONS,
        )

    def client_key(self, host: str | None) -> str | None:
        """The key one client's connections are counted under; None: not capped (a trusted
        proxy, or no IP address)."""
        if host is None:
            return None
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in self.trusted):
            return None
        if isinstance(ip, ipaddress.IPv6Address):
            return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
        return str(ip)

    def note_refused(self, reason: str, client: str | None) -> None:
        """Count a connection a bound closed; logged at the 1st, 10th, 100th ... of each
        reason (an attack makes thousands, and the log must not be the next thing it fills)."""
        self.refused[reason] += 1
        count = self.refused[reason]
        if str(count).rstrip("0") == "1":
            log.warning(
                "HTTP connection closed: %s (%d so far)",
                reason,
                count,
                extra={"client": client, "reason": reason, "count": count},
            )


def probes_only(app: ASGIApp, *, other: int = 503) -> ASGIApp:
    """``app`` for :data:`PROBE_PATHS` only; anything else is answered ``other`` (a problem;
    a 503 with ``Retry-After``) and the connection closed."""
    headers = {"Connection": "close"} | ({"Retry-After": "1"} if other == 503 else {})
    detail = (
        "the server's connections are all taken; retry shortly"
        if other == 503
        else "this port serves only /healthz and /readyz"
    )
    refusal = JSONResponse(
        {
            "type": "about:blank",
            "title": HTTPStatus(other).phrase,
            "status": other,
            "detail": detail,
        },
        status_code=other,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in PROBE_PATHS:
            await app(scope, receive, send)
        else:
            await refusal(scope, receive, send)

    return gated


class BoundedProtocol(H11Protocol):
    """uvicorn's h11 protocol under :class:`Bounds` (:data:`BOUNDS`, set by
    :func:`bounded_protocol`)."""

    BOUNDS: Bounds

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.timeout_keep_alive = self.BOUNDS.keep_alive_timeout  # type: ignore[assignment]
        self._counted: str | None = None
        self._counted_open = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_start = 0.0
        self._body_bytes = 0
        self._lingering = False

    # connection accounting

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._count_body_data()
        bounds = self.BOUNDS
        host = self._host
        key = bounds.client_key(host)
        if key is not None and bounds.by_client[key] >= bounds.per_client:
            self._refuse("a client's connections past api.max_connections_per_client", host)
            return
        if bounds.open >= bounds.max_connections + bounds.probe_reserve:
            self._refuse("connections past api.max_connections and api.probe_reserve", host)
            return
        if bounds.open >= bounds.max_connections:
            self.app = probes_only(self.app)
        bounds.open += 1
        self._counted_open = True
        if key is not None:
            bounds.by_client[key] += 1
            self._counted = key
        self._arm_header_timer()

    def _refuse(self, reason: str, host: str | None) -> None:
        self.BOUNDS.note_refused(reason, host)
        self.transport.abort()  # nothing read, nothing to say: the socket is freed at once

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._cancel_header_timer()
        self._cancel_body_timer()
        bounds = self.BOUNDS
        if self._counted_open:
            self._counted_open = False
            bounds.open -= 1
        if self._counted is not None:
            bounds.by_client[self._counted] -= 1
            if bounds.by_client[self._counted] <= 0:
                del bounds.by_client[self._counted]
            self._counted = None

    # reading: the header and body clocks follow h11's view of the client's side

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the rest of a body already answered 408
        if self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # a request begins (or a connection's first bytes)
        super().data_received(data)
        self._follow()

    def _count_body_data(self) -> None:
        """Count the body's bytes as h11 hands them on (its ``Data`` events): a chunked body's
        framing and chunk extensions earn the body no time, only its data does."""
        next_event = self.conn.next_event

        def counted() -> Any:
            event = next_event()
            if type(event) is h11.Data:
                self._body_bytes += len(event.data)
            return event

        self.conn.next_event = counted  # type: ignore[method-assign]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request already received
        self._follow()

    def _follow(self) -> None:
        """Start or stop the clocks as the client's side moved on."""
        state = self.conn.their_state
        if state is not h11.IDLE:
            self._cancel_header_timer()  # the headers are in
        if state is h11.SEND_BODY:
            if self._body_timer is None:
                self._restart_body_clock()
        else:
            self._cancel_body_timer()

    @property
    def _host(self) -> str | None:
        return self.client[0] if self.client else None

    def _arm_header_timer(self) -> None:
        if self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(
                self.BOUNDS.header_timeout, self._headers_late
            )

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.BOUNDS.note_refused("headers not complete within api.header_timeout", self._host)
            self.transport.close()

    def _restart_body_clock(self) -> None:
        self._cancel_body_timer()
        self._body_start = self.loop.time()
        self._body_bytes = 0
        self._body_timer = self.loop.call_later(self.BOUNDS.body_timeout, self._body_check)

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_deadline(self) -> float:
        bounds = self.BOUNDS
        earned = self._body_bytes / bounds.body_min_rate if bounds.body_min_rate else 0.0
        return self._body_start + bounds.body_timeout + earned

    def _body_check(self) -> None:
        self._body_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        cycle = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self._restart_body_clock()  # the server holds the body back: not the client's delay
            return
        now = self.loop.time()
        deadline = self._body_deadline()
        if now < deadline:
            self._body_timer = self.loop.call_at(deadline, self._body_check)
            return
        self.BOUNDS.note_refused("body not received within api.body_timeout", self._host)
        self._answer_408()

    def _answer_408(self) -> None:
        """408 and close; the application's request sees a disconnect (its answer, if any
        comes later, goes nowhere)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True
            cycle.message_event.set()
            body = (
                b'{"type":"about:blank","title":"Request Timeout","status":408,'
                b'"detail":"the request body did not arrive in time"}'
            )
            headers = [
                (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            try:
                for event in (
                    h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"),
                    h11.Data(data=body),
                    h11.EndOfMessage(),
                ):
                    self.transport.write(self.conn.send(event) or b"")
            except h11.LocalProtocolError:  # h11 says this connection cannot answer now
                pass
        self._lingering = True
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()  # after the answer: the client reads it, then EOF
        self.loop.call_later(LINGER, self.transport.close)


def bounded_protocol(bounds: Bounds) -> type[BoundedProtocol]:
    """The protocol class for one listener (uvicorn makes one instance per connection)."""
    return type("BoundedProtocol", (BoundedProtocol,), {"BOUNDS": bounds})
