"""Enqueue jobs in a transaction, run a worker until nothing is due, print what happened.

    python main.py

In production the worker is its own process (``tickwork worker --app tasks:app --queues
default,mail``); here it runs in this script, until it finds nothing more to do.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg
from tickwork import Outcome

from tasks import app, charge, send_receipt

ORDERS = [(1, "ada@example.com", 1250), (2, "bob@example.com", 0)]


def place_orders() -> None:
    with psycopg.connect(app.db.url) as conn:  # one transaction: the orders and their jobs
        # a temporary table stands in for your own tables
        conn.execute("CREATE TEMP TABLE orders (id int PRIMARY KEY, email text, cents int)")
        for order_id, email, cents in ORDERS:
            conn.execute("INSERT INTO orders VALUES (%s, %s, %s)", (order_id, email, cents))
            charge.defer(order_id=order_id, cents=cents, conn=conn)
            send_receipt.defer(order_id=order_id, email=email, conn=conn)
    with psycopg.connect(app.db.url) as conn:
        send_receipt.defer(order_id=3, email="eve@example.com", conn=conn)
        conn.rollback()  # this order failed: its job never existed


async def work() -> list[Outcome]:
    """Claim and run jobs until a pass finds none due."""
    outcomes: list[Outcome] = []
    async with app.worker(queues=["default", "mail"]) as worker:
        while batch := (await worker.run_once()).outcomes:
            outcomes += batch
    return outcomes


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app.migrate()
    place_orders()
    for outcome in sorted(asyncio.run(work()), key=lambda o: o.job_id):
        job = app.get_job(outcome.job_id)
        detail = job.result if job.error is None else f"{job.error.type}: {job.error.message}"
        print(f"job {job.id} {job.task} {job.state.value}: {detail}")
    app.close()


if __name__ == "__main__":
    main()
