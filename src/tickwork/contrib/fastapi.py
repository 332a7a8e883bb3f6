"""tickwork in a FastAPI application: the pools opened and closed with the application, a
dependency that hands a handler a transaction to enqueue in, and tickwork's control plane (the
REST API and the dashboard) to mount under a path of the application.

```python
from typing import Annotated

from fastapi import FastAPI
from psycopg import AsyncConnection

from tickwork.contrib.fastapi import lifespan, transaction

api = FastAPI(lifespan=lifespan(app))
Transaction = Annotated[AsyncConnection, transaction(app)]


@api.post("/orders")
async def place(order: OrderIn, tx: Transaction) -> dict[str, int]:
    job = await send_receipt.defer_async(conn=tx, order_id=order.id)
    return {"job": job.id}
```

The transaction commits when the handler returns, before the response is sent (a commit that
fails is the request's error, so a client is never told of a job that was not stored), and
rolls back when the handler raises: the job is enqueued exactly when the request succeeds.
Needs FastAPI 0.118 or later (``Depends(scope="function")``).

```python
plane = control_plane(app)
api = FastAPI(lifespan=lifespan(app, plane))
api.mount("/tickwork", plane)  # the dashboard at /tickwork/, the API at /tickwork/api/
```

The control plane answers requests only (no executor or other background service runs with
it); the application's lifespan starts it, since a mounted application's own is never run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import Depends

from tickwork.api.plane import ControlPlane

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from tickwork.app import App

__all__ = ["ControlPlane", "control_plane", "lifespan", "transaction"]


def lifespan(app: App, *planes: ControlPlane) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """``FastAPI(lifespan=lifespan(app))``: the app's pool opened at start (a database out of
    reach fails the start, not the first request) and every pool closed at shutdown. Each of
    ``planes`` (:func:`control_plane`) starts with it (opening the pool, whose callers then
    wait at most ``api.database_wait`` for a connection) and stops before the pools close: an
    application that mounts one must pass it here (a mounted app's own lifespan never runs)."""

    @asynccontextmanager
    async def run(_: Any) -> AsyncIterator[None]:
        try:
            async with AsyncExitStack() as started:
                for plane in planes:
                    await started.enter_async_context(plane.running())
                await app.db.async_pool()
                yield
        finally:
            await app.aclose()

    return run


def control_plane(app: App) -> ControlPlane:
    """tickwork's REST API and dashboard as one ASGI application, to mount under a path
    (``api.mount("/tickwork", control_plane(app))``: the dashboard at ``/tickwork/``, the API
    at ``/tickwork/api/``, its docs at ``/tickwork/api/docs``), started by
    ``lifespan(app, plane)``. It answers requests only: jobs run in ``tickwork worker`` or
    ``tickwork serve`` processes (or an executor the application starts itself)."""
    return ControlPlane(app)


def transaction(app: App) -> Any:
    """A dependency (``Annotated[AsyncConnection, transaction(app)]``): a connection of the
    app's pool in an open transaction, committed when the handler returns, rolled back when
    it raises."""

    async def open_transaction() -> AsyncIterator[AsyncConnection[Any]]:
        pool = await app.db.async_pool()
        async with pool.connection() as conn, conn.transaction():
            yield conn

    return Depends(open_transaction, scope="function")
