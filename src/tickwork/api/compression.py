"""Compressed answers: gzip for a client whose ``Accept-Encoding`` takes it (RFC 9110 section
12.5.3, weights read), for answers of at least :data:`COMPRESS_FROM_BYTES`; never an event
stream (Starlette's middleware leaves those, and answers already encoded, alone). The
dashboard's files are gzipped once at build (:mod:`tickwork.web`)."""

from __future__ import annotations

from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

COMPRESS_FROM_BYTES = 1024
"""Answers at least this large are gzipped for a client that accepts it."""


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header (RFC 9110 section 12.5.3) takes gzip: named with
    a q above 0, or not named and ``*`` is."""
    weights: dict[str, float] = {}
    for item in (accept_encoding or "").lower().split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding:
            weights[coding] = q
    for coding in ("gzip", "x-gzip", "*"):
        if coding in weights:
            return weights[coding] > 0
    return False


class Compress:
    """ASGI middleware: Starlette's gzip, for the clients :func:`accepts_gzip` says take it
    (Starlette's own test finds ``gzip`` anywhere in the header, ``gzip;q=0`` included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=COMPRESS_FROM_BYTES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope["headers"]
            asked = b", ".join(v for k, v in headers if k.lower() == b"accept-encoding")
            if not accepts_gzip(asked.decode("latin-1")):
                kept = [(k, v) for k, v in headers if k.lower() != b"accept-encoding"]
                scope = {**scope, "headers": kept}  # not gzip: answered as sent
        await self.gzip(scope, receive, send)
