"""What /mcp refuses of a body before the SDK parses it, and a body cut short by a client
that left: nothing of it runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tickwork.mcp.server import MAX_VALUES, _body, _body_refusal, _Gone

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}


def status(body: bytes | None) -> int | None:
    refusal = asyncio.run(_body_refusal(body, 1_000_000))
    return None if refusal is None else refusal[0]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (json.dumps(PING).encode(), None),
        (None, 413),
        (json.dumps(PING).encode("utf-16-le"), 400),  # NULs: the SDK's parser would take it
        (json.dumps(PING).encode("utf-32"), 400),
        (b'{"x": "\\u00ff"}', None),  # an escaped character is text
        (b'{"x": "' + bytes([0xFF]) + b'"}', 400),  # not UTF-8
        (b'{"id": ' + b"9" * 5000 + b"}", 400),  # Python will not parse this number
        (b'{"x": ' + b"[" * 65 + b"]" * 65 + b"}", 400),  # too deep
        (b'{"x": ' + b"[" * 100_000 + b"}", 400),
        (b'{"x": [' + b"[]," * MAX_VALUES + b"[]]}", 400),  # too many containers
        (b"{not json", 400),
    ],
)
def test_bodies_the_sdk_is_not_handed(body: bytes | None, expected: int | None) -> None:
    assert status(body) == expected


def test_a_body_cut_short_by_a_client_that_left_is_not_run() -> None:
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"jsonrpc": "2.0", ', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    with pytest.raises(_Gone):
        asyncio.run(_body(receive, 1_000_000))
