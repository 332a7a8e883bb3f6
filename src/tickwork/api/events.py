"""``GET /api/events``: what changed, pushed to the dashboard as server-sent events, so its
live views ask again when something happened instead of polling in a storm.

One LISTEN connection per API process feeds every open stream (the job path's own
notifications: jobs enqueued or back in a queue, jobs that reached a final state, cancels
sent to running jobs), and one look at the live attempts every :data:`CLAIM_LOOK` seconds
tells them of claims (which notify no one); each stream gets at most one event of a kind per
:data:`MIN_GAP` seconds, whatever the rate of changes. Events say only which kind of thing
changed (and, for jobs, which queues or ids): the page reads the details through the API as
the signed-in user. The listener runs while at least one stream is open.

A stream is checked like any request when it opens, and its access token again every
:data:`RECHECK` seconds: a user disabled, a role changed or a token expired ends it (the
page then renews its token and opens a new one). At most :data:`MAX_STREAMS` streams per
process, :data:`MAX_STREAMS_PER_USER` per user (429 beyond: the page polls instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import StreamingResponse

from tickwork.api.security import Services, caller, services
from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.errors import Throttled, TickworkError
from tickwork.worker.listener import Listener

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from tickwork.db.store import Store

log = logging.getLogger("tickwork.api")


EVENTS_PATH = "/api/events"
KINDS = ("jobs", "finished", "control")
"""The notification channels a stream carries (the job path's own)."""
CLAIM_LOOK = 2.0
"""Seconds between two looks at the live attempts (for ``running`` events)."""
LOOK_ERRORS: tuple[type[BaseException], ...] = (TickworkError, *CONNECTION_ERRORS)
"""What a look at the live attempts survives (the database away: the next look tries again)."""
MIN_GAP = 0.5
"""Seconds between two events of a stream: changes in between are sent together."""
KEEPALIVE = 15.0
"""Seconds of quiet after which a stream sends a comment (proxies close idle connections)."""
RECHECK = 15.0
"""Seconds between two checks of a stream's access token."""
MAX_STREAMS = 200
"""Open streams one API process serves at most."""
MAX_STREAMS_PER_USER = 10
"""Open streams one user may hold in one API process (a tab each): one user cannot take
every stream from the others."""
MAX_IDS = 100
"""Job ids one event carries at most (more: the page reloads what it shows)."""


class _Stream:
    """What one open stream has not been told yet."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.pending: dict[str, set[str]] = {}
        self.wake = asyncio.Event()

    def add(self, kind: str, payload: str) -> None:
        seen = self.pending.setdefault(kind, set())
        if len(seen) <= MAX_IDS:
            seen.update(p for p in payload.split(",") if p)
        self.wake.set()

    def take(self) -> dict[str, set[str]]:
        taken, self.pending = self.pending, {}
        self.wake.clear()
        return taken


class EventHub:
    """The process's listener and its open streams."""

    def __init__(self, store: Store, connect: Any, pool: AsyncConnectionPool[Any]) -> None:
        self.store = store
        self._connect = connect
        self._pool = pool
        self._streams: set[_Stream] = set()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    def _notify(self, channel: str, payload: str) -> None:
        kind = channel.rsplit(".", 1)[-1]
        for stream in self._streams:
            stream.add(kind, payload)

    def _connected(self) -> None:
        self.listening.set()
        for stream in self._streams:  # what was sent while not listening is lost: look again
            stream.add("resync", "")

    def refusal(self, owner: str) -> str | None:
        """Why this process opens no more streams (for ``owner``), or None."""
        if len(self._streams) >= MAX_STREAMS:
            return f"this process serves {MAX_STREAMS} event streams already"
        if sum(s.owner == owner for s in self._streams) >= MAX_STREAMS_PER_USER:
            return f"this user holds {MAX_STREAMS_PER_USER} event streams already"
        return None

    @contextlib.asynccontextmanager
    async def open(self, owner: str) -> AsyncIterator[_Stream]:
        """A stream, for as long as the caller holds it; the listener runs while any is."""
        stream = _Stream(owner)
        self._streams.add(stream)
        if self._task is None or self._task.done():
            self._stop = asyncio.Event()
            listener = Listener(
                lambda: self._connect("tickwork-events"),
                [self.store.channel(kind) for kind in KINDS],
                on_notify=self._notify,
                on_connected=self._connected,
                on_lost=self.listening.clear,
            )
            self._task = asyncio.create_task(self._run(listener), name="tickwork-events")
        try:
            yield stream
        finally:
            self._streams.discard(stream)
            if not self._streams and self._task is not None:
                self._stop.set()
                self._task.cancel()
                self._task = None

    async def _run(self, listener: Listener) -> None:
        """The listener, and the look at the live attempts beside it."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(listener.run(self._stop))
            tasks.create_task(self._watch_claims())

    async def _watch_claims(self) -> None:
        """Claims send no notification (a NOTIFY per claim would cost the job path its
        throughput): one read of the live attempts every :data:`CLAIM_LOOK` seconds, for
        every stream of this process, tells them when jobs started running."""
        seen = None
        while not self._stop.is_set():
            try:
                async with self._pool.connection() as conn:
                    now = await self.store.execution_live_signature(conn)
            except LOOK_ERRORS as exc:
                log.debug("could not look at the live attempts", extra={"error": str(exc)})
            else:
                if seen is not None and now != seen:
                    self._notify("running", "")
                seen = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), CLAIM_LOOK)


def _hub(svc: Services) -> EventHub:
    hub: EventHub | None = getattr(svc, "event_hub", None)
    if hub is None:
        hub = EventHub(svc.store, svc.app.db.connect_listener, svc.pool)
        svc.event_hub = hub
    return hub


def _frame(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def install(api: FastAPI) -> None:
    """Add the stream's route to the app itself (left out of the OpenAPI document, which does
    not describe a stream; the route table's check finds it there)."""
    api.add_api_route(EVENTS_PATH, events, methods=["GET"], include_in_schema=False)


async def events(request: Request, svc: Services = Depends(services)) -> StreamingResponse:  # noqa: B008
    """Server-sent events: ``jobs`` (``{"queues": [...]}``: jobs enqueued, retried or back
    in these queues), ``finished`` (``{"ids": [...]}``: jobs that reached a final state;
    empty when there were too many to name), ``control`` (cancels sent to running jobs),
    ``running`` (jobs started or stopped running: claims, seen every 2 seconds),
    ``resync`` (the listener reconnected: anything may have changed)."""
    token = (request.headers.get("authorization") or "").partition(" ")[2]
    hub = _hub(svc)
    owner = caller(request).actor
    refusal = hub.refusal(owner)
    if refusal is not None:  # the page polls instead
        raise Throttled(f"the event stream ({refusal})", KEEPALIVE)

    async def body() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        checked = loop.time()
        async with hub.open(owner) as stream:
            yield b": tickwork events\nretry: 3000\n\n"
            while True:
                # a client that went away is found at the next write (a keepalive at most
                # KEEPALIVE seconds later), which ends this generator and frees its place
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stream.wake.wait(), KEEPALIVE)
                if loop.time() - checked >= RECHECK:
                    try:
                        await svc.auth.authenticate(token)
                    except TickworkError:
                        yield _frame("ended", {"reason": "the session ended; sign in again"})
                        return
                    checked = loop.time()
                changes = stream.take()
                if not changes:
                    yield b": keepalive\n\n"
                    continue
                for kind, payloads in sorted(changes.items()):
                    if kind == "jobs":
                        yield _frame(kind, {"queues": sorted(payloads)[:MAX_IDS]})
                    elif kind in ("finished", "control"):
                        ids = sorted(p.removeprefix("cancel:") for p in payloads)
                        yield _frame(kind, {"ids": ids if len(ids) <= MAX_IDS else []})
                    else:
                        yield _frame(kind, {})
                await asyncio.sleep(MIN_GAP)  # a rate limit, not a synchronisation

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
