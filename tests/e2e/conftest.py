"""Fixtures the end-to-end tests share."""

from __future__ import annotations

import pytest

from tickwork import App


@pytest.fixture
def noop_app(app: App) -> App:
    """``app`` with a stub of the worker app's ``e2e.noop``, to enqueue it (it runs only in
    the worker processes)."""

    @app.task(name="e2e.noop")
    async def noop() -> None:
        raise AssertionError("runs only in the worker processes")

    return app
