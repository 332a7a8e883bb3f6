"""The request deadline, on an ASGI application that waits until the test lets it answer:
a request past it is answered 503 (and its handler cancelled, its late answer dropped); the
event stream's path is not cut."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tickwork.api.deadline import TITLE, Deadline

GUARD = 60.0
"""Not a timing assertion: only stops a broken test from hanging."""


class Waiting:
    """Answers 200 once :attr:`release` is set; remembers whether it was cancelled."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"late"})


async def test_a_request_past_the_deadline_answers_503_and_its_handler_is_cancelled() -> None:
    inner = Waiting()
    app = Deadline(inner, seconds=0.05)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answer = await asyncio.wait_for(client.get("/api/jobs"), GUARD)
        assert answer.status_code == 503
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.headers["retry-after"].isdigit()
        assert answer.json()["title"] == TITLE
        assert "api.request_deadline" in answer.json()["detail"]
        await asyncio.wait_for(inner.cancelled.wait(), GUARD)
    assert app.passed == 1


async def test_the_event_stream_is_not_cut() -> None:
    stream, other = Waiting(), Waiting()

    async def route(scope: Any, receive: Any, send: Any) -> None:
        await (stream if scope["path"] == "/api/events" else other)(scope, receive, send)

    app = Deadline(route, seconds=0.05, exempt=["/api/events"])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        streaming = asyncio.ensure_future(client.get("/api/events"))
        await asyncio.wait_for(stream.entered.wait(), GUARD)
        # a request started after the stream has passed its deadline: so has the stream
        assert (await asyncio.wait_for(client.get("/api/queues"), GUARD)).status_code == 503
        assert not streaming.done()
        stream.release.set()
        answer = await asyncio.wait_for(streaming, GUARD)
    assert answer.status_code == 200 and answer.content == b"late"
    assert not stream.cancelled.is_set()
