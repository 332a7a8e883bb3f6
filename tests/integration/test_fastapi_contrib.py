"""tickwork in a user's FastAPI application: the lifespan opens and closes the pools, and a
handler's transaction enqueues exactly when the request succeeds."""

# (no "from __future__ import annotations": FastAPI reads the handler's annotations, which
# name a local of the function that builds it)
from typing import Annotated, Any

import httpx
import psycopg
from fastapi import FastAPI, HTTPException
from psycopg import AsyncConnection

from tickwork import App
from tickwork.contrib.fastapi import lifespan, transaction


def build(database_url: str, schema: str) -> tuple[App, FastAPI]:
    app = App(database_url=database_url, schema=schema)

    @app.task(queue="mail")
    def send_receipt(order_id: int) -> None:
        pass

    api = FastAPI(lifespan=lifespan(app))
    tx_type = Annotated[AsyncConnection, transaction(app)]

    @api.post("/orders/{order_id}")
    async def place(order_id: int, tx: tx_type) -> dict[str, int]:
        await tx.execute(f"INSERT INTO {schema}.orders (id) VALUES (%s)", [order_id])
        job = await send_receipt.defer_async(conn=tx, order_id=order_id)
        if order_id < 0:
            raise HTTPException(400, "refused after the job was enqueued")
        return {"job": job.id}

    return app, api


async def test_a_handlers_transaction_enqueues_only_when_the_request_succeeds(
    database_url: str, schema: str, clean: None, sql: psycopg.Connection[Any]
) -> None:
    sql.execute("CREATE TABLE orders (id int PRIMARY KEY)")  # the user's own table, same schema
    try:
        _, api = build(database_url, schema)
        transport = httpx.ASGITransport(app=api)
        async with (
            api.router.lifespan_context(api),  # as the server runs it: start, then shutdown
            httpx.AsyncClient(transport=transport, base_url="http://test") as client,
        ):
            placed = await client.post("/orders/7")
            assert placed.status_code == 200, placed.text
            refused = await client.post("/orders/-1")
            assert refused.status_code == 400
        jobs = sql.execute("SELECT id, args FROM jobs ORDER BY id").fetchall()
        assert jobs == [(placed.json()["job"], {"order_id": 7})]  # the refused one rolled back
        assert sql.execute("SELECT id FROM orders").fetchall() == [(7,)]
    finally:
        sql.execute("DROP TABLE IF EXISTS orders")
