"""The App that the signal crash test runs with ``tickwork serve --roles signals``.

Reactor ``a`` records the signal; reactor ``b`` records it too, but while the environment
says ``BLOCK_B=1`` it first marks that it started (on its own connection, so the test can
see it) and then hangs, so the test can kill the process mid-delivery. Both write through
the delivery's transaction: a row exists only if that delivery committed.
"""

from __future__ import annotations

import asyncio
import os

import psycopg

from tickwork import App
from tickwork.signals import Reactor, ReactorContext, Signal

app = App()
TABLE = f"{app.settings.schema_name}.crash_log"


class Record(Reactor):
    handles = frozenset({"CRASH_TEST"})
    organisation_scoped = False

    def __init__(self, name: str) -> None:
        self.name = name

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        if self.name == "b" and os.environ.get("BLOCK_B") == "1":
            async with await psycopg.AsyncConnection.connect(app.db.url, autocommit=True) as c:
                await c.execute(
                    f"INSERT INTO {TABLE} (reactor, signal_id, pid) VALUES ('b-started', %s, %s)",
                    (signal.id, os.getpid()),
                )
            await asyncio.sleep(3600)  # killed long before this ends
        await ctx.conn.execute(
            f"INSERT INTO {TABLE} (reactor, signal_id, pid) VALUES (%s, %s, %s)",
            (self.name, signal.id, os.getpid()),
        )


app.add_reactor(Record("a"))
app.add_reactor(Record("b"))
