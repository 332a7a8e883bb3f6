"""The App ``tickwork serve --app queues_app:app`` runs in the runtimes end-to-end tests: a
task on a queue of its own, which serve's executor claims without being told."""

from __future__ import annotations

from tickwork import App

app = App()


@app.task(name="e2e.mail", queue="mail")
async def mail(to: str) -> str:
    return f"mailed {to}"
