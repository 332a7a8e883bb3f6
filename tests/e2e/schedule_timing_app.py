"""An app whose schedules fire every five seconds and every second (``--app
schedule_timing_app:app``): the jobs stay PENDING on a queue no executor takes, so the test
reads when each was created against its fire time."""

from __future__ import annotations

from tickwork import App

app = App()


@app.schedule("*/5 * * * * *", name="every-five")
@app.task(name="e2e.every_five", queue="timed")
def every_five() -> None:
    """Never runs: its jobs are counted."""


@app.schedule("* * * * * *", name="every-second")
@app.task(name="e2e.every_second", queue="timed")
def every_second() -> None:
    """Never runs: its jobs are counted."""
