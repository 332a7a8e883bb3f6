"""A worker app with one schedule firing every second (``--app schedule_app:app``)."""

from __future__ import annotations

from tickwork import App

app = App()


@app.schedule("* * * * * *", name="every-second", misfire="ALL", misfire_limit=1000)
@app.task(name="e2e.tick", queue="ticks")
def tick() -> None:
    """Does nothing; the test counts the jobs the schedule materialises."""
