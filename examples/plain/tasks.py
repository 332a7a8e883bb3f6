"""The example's tasks: a function each, registered on the app."""

from __future__ import annotations

from tickwork import App

app = App()  # TICKWORK_DATABASE_URL (and TICKWORK_SCHEMA), else the embedded PostgreSQL


@app.task(queue="mail")
def send_receipt(order_id: int, email: str) -> str:
    return f"receipt for order {order_id} sent to {email}"


@app.task(max_attempts=1)  # one attempt: a failure is a dead letter at once
def charge(order_id: int, cents: int) -> int:
    if cents <= 0:
        raise ValueError(f"order {order_id}: cannot charge {cents} cents")
    return cents
