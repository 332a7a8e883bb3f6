"""tickwork in a FastAPI application: the pools opened and closed with the application, and a
dependency that hands a handler a transaction to enqueue in.

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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import Depends

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from tickwork.app import App


def lifespan(app: App) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """``FastAPI(lifespan=lifespan(app))``: the app's pool opened at start (a database out of
    reach fails the start, not the first request) and every pool closed at shutdown."""

    @asynccontextmanager
    async def run(_: Any) -> AsyncIterator[None]:
        await app.db.async_pool()
        try:
            yield
        finally:
            await app.aclose()

    return run


def transaction(app: App) -> Any:
    """A dependency (``Annotated[AsyncConnection, transaction(app)]``): a connection of the
    app's pool in an open transaction, committed when the handler returns, rolled back when
    it raises."""

    async def open_transaction() -> AsyncIterator[AsyncConnection[Any]]:
        pool = await app.db.async_pool()
        async with pool.connection() as conn, conn.transaction():
            yield conn

    return Depends(open_transaction, scope="function")
