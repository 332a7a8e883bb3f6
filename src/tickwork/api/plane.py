"""The control plane - the REST API and the dashboard - as one ASGI application to mount inside
another under any path (``api.mount("/tickwork", plane)``), or to serve on its own.

What it answers is addressed relative to where it is mounted, read from each request's ASGI
``root_path`` (which a mount sets): the dashboard's files and pages, the API the page calls,
the refresh cookie's path, the API docs' links. Nothing is configured for it.

It answers requests only: no executor, scheduler or other background service of ``tickwork
serve`` runs with it (run ``tickwork worker``, or ``tickwork serve --roles`` without ``api``,
beside the application). What the API needs in the process is made when it starts
(:meth:`ControlPlane.start`): the pool, the tokens' signing key, the LISTEN connection that
keeps the session cache honest; the dashboard's event stream opens its own LISTEN when a page
first asks. A host application does not run a mounted application's lifespan, so the host's
lifespan must start and stop it (``lifespan(app, plane)`` in :mod:`tickwork.contrib.fastapi`);
until then every request is answered 503. Served on its own, its ASGI lifespan does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from tickwork.api.problems import problem

if TYPE_CHECKING:
    from fastapi import FastAPI

    from tickwork.app import App

__all__ = ["ControlPlane"]

log = logging.getLogger("tickwork.api")

NOT_STARTED = (
    "tickwork's control plane has not started: start it with the application that mounts it"
    " (FastAPI(lifespan=lifespan(app, plane)), tickwork.contrib.fastapi)"
)


class ControlPlane:
    """The API and the dashboard of ``app``, built when :meth:`start` runs."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._api: FastAPI | None = None
        self._stop = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        """Whether it answers requests (between :meth:`start` and :meth:`stop`)."""
        return self._api is not None

    async def start(self) -> None:
        """Open the app's pool (a database out of reach fails here, not at the first request),
        load the tokens' signing key, create the first administrator when
        ``auth.admin_password`` is set and no user exists, and watch for revoked sessions."""
        if self._api is not None:
            return
        from tickwork.api import create_api
        from tickwork.auth import AuthService

        settings = self.app.settings
        # requests wait this long for a connection, then answer 503 (as under serve)
        pool = await self.app.db.async_pool(timeout=settings.api.database_wait)
        auth = AuthService(
            pool, self.app.db.store, settings.auth, connect_listener=self.app.db.connect_listener
        )
        await auth.start()
        if settings.auth.admin_password is not None:  # never a generated one: no one would see it
            await auth.bootstrap_admin(
                settings.auth.admin_email, settings.auth.admin_password.get_secret_value()
            )
        self._stop = asyncio.Event()
        self._watch = asyncio.create_task(auth.watch_sessions(self._stop), name="tickwork-sessions")
        self._api = create_api(self.app, auth, pool)

    async def stop(self) -> None:
        """Stop answering (503 again) and stop watching sessions; the pools stay open (the
        application closes them: ``app.aclose()``)."""
        self._api = None
        self._stop.set()
        if self._watch is not None:
            watch, self._watch = self._watch, None
            await watch

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Started for the duration of the block."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # served on its own; a mount never sends this
            await self._lifespan(receive, send)
            return
        api = self._api
        if api is not None:
            await api(scope, receive, send)
        elif scope["type"] == "http":
            await problem(503, "Not started", NOT_STARTED)(scope, receive, send)
        else:
            await send({"type": "websocket.close", "code": 1013})  # try again later

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:
                    log.exception("the control plane could not start")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await self.app.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
