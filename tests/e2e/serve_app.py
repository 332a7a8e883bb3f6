"""The App ``tickwork serve --app serve_app:app`` runs in the serve end-to-end test."""

from __future__ import annotations

from tickwork import App

app = App()


@app.task(name="e2e.greet", queue="default")
def greet(name: str) -> str:
    return f"hello {name}"
