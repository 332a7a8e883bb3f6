"""The request deadline: a request that has not answered within ``api.request_deadline``
seconds is abandoned and answered 503.

The server's ``statement_timeout`` cannot bound a database that stopped answering (a server
process stopped, a network that swallows packets): its socket stays open and quiet, and a
request waiting on it would wait for ever. Here the request runs in a task of its own; past
the deadline it is cancelled without waiting for it, and the client gets a 503 problem with
Retry-After at once. The cancelled task does not hand its connection back mid-statement:
psycopg asks the server to cancel the statement and closes the connection when that gets no
answer, and the pool discards a connection returned in any state but idle.

A response already under way when the deadline passes cannot be replaced: its connection is
closed instead. The paths in ``exempt`` (the dashboard's event stream, which bounds itself)
are not cut.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.paths import route_path
from tickwork.api.problems import RETRY_AFTER_UNAVAILABLE, problem

log = logging.getLogger("tickwork.api")

TITLE = "Request deadline passed"


class Deadline:
    """ASGI middleware: every HTTP request answers within ``seconds`` (503 past it)."""

    def __init__(self, app: ASGIApp, *, seconds: float, exempt: Collection[str] = ()) -> None:
        self.app = app
        self.seconds = seconds
        self.exempt = frozenset(exempt)
        """Paths (below the mount) whose requests are not cut."""
        self.passed = 0
        """Requests answered 503 (or cut) by the deadline."""
        self._abandoned: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self.exempt:
            await self.app(scope, receive, send)
            return
        started = False
        late = False

        async def sending(message: Message) -> None:
            nonlocal started
            if late:  # the deadline has answered: the abandoned request says nothing more
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, sending))
        try:
            done, _ = await asyncio.wait({task}, timeout=self.seconds)
        except BaseException:  # cancelled itself (the server stopping): so is the request
            task.cancel()
            raise
        if done:
            task.result()  # its exception, if any, is the server's to log
            return
        late = True
        self._abandon(task)
        self.passed += 1
        log.warning(
            "request past its deadline",
            extra={
                "method": scope.get("method"),
                "path": route_path(scope),
                "deadline": self.seconds,
                "answered": not started,
            },
        )
        if started:  # part of an answer went out: nothing to do but end it
            return
        await problem(
            503,
            TITLE,
            f"the request did not complete within {self.seconds:g} s (api.request_deadline);"
            " the database may not be answering: retry shortly",
            headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE)},
        )(scope, receive, send)

    def _abandon(self, task: asyncio.Task[Any]) -> None:
        """Cancel ``task`` without waiting for it: its cleanup (a cancel request to a server
        that may not answer) takes its own bounded time."""
        self._abandoned.add(task)
        task.add_done_callback(self._ended)
        task.cancel()

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._abandoned.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("an abandoned request ended with an error", exc_info=task.exception())
