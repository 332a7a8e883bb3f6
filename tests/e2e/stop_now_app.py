"""The App of the stop-now tests (``--app stop_now_app:app``): handlers that run for as long
as they are told, one sync (in a thread, which nothing can interrupt) and one async."""

from __future__ import annotations

import asyncio
import time

from tickwork import App

app = App()


@app.task(name="e2e.sleep_sync")
def sleep_sync(seconds: float) -> None:
    """Blocks its thread for ``seconds``."""
    time.sleep(seconds)


@app.task(name="e2e.sleep_async")
async def sleep_async(seconds: float) -> None:
    """Sleeps on the event loop for ``seconds`` (an interrupt lands at the await)."""
    await asyncio.sleep(seconds)
