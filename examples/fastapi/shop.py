"""A FastAPI application that enqueues a job in each request's transaction.

uvicorn shop:api                     # the web application
tickwork worker --app shop:app       # a worker (as many as you like)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, HTTPException
from psycopg import AsyncConnection

from tickwork import App
from tickwork.contrib.fastapi import lifespan, transaction

app = App()  # TICKWORK_DATABASE_URL (and TICKWORK_SCHEMA), else the embedded PostgreSQL


@app.task
def send_receipt(order_id: int) -> str:
    return f"receipt for order {order_id}"


api = FastAPI(lifespan=lifespan(app))  # opens tickwork's pools at start, closes them at the end
Transaction = Annotated[AsyncConnection, transaction(app)]


@api.post("/orders/{order_id}", status_code=201)
async def place_order(order_id: int, tx: Transaction) -> dict[str, int]:
    """Place an order: the receipt's job commits with the request, or not at all."""
    # await tx.execute("INSERT INTO orders ...")  your own writes, in the same transaction
    job = await send_receipt.defer_async(order_id=order_id, conn=tx)
    if order_id > 1000:
        raise HTTPException(404, f"no order {order_id}")  # rolled back: no receipt is sent
    return {"order_id": order_id, "receipt_job": job.id}


@api.get("/jobs/{job_id}")
async def job_state(job_id: int) -> dict[str, object]:
    """What became of a job."""
    job = await app.get_job_async(job_id)
    return {"id": job.id, "state": job.state.value, "result": job.result}
