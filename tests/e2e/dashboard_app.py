"""The App the dashboard's browser tests serve: a job that succeeds, one that fails the first
time it runs for a marker file and succeeds after (a dead letter an operator retries), and one
that runs until it is cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tickwork import App

app = App()


@app.task(name="ui.ok", queue="ui")
def ok(word: str = "hi") -> str:
    return word


@app.task(name="ui.flaky", queue="ui", max_attempts=1)
def flaky(marker: str) -> str:
    path = Path(marker)
    if not path.exists():
        path.write_text("failed once")
        raise RuntimeError("the first run fails on purpose")
    return "fine the second time"


@app.task(name="ui.slow", queue="ui")
async def slow() -> None:
    await asyncio.sleep(3600)
