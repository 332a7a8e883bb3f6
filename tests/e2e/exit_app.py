"""The App of the exit tests (``--app exit_app:app``), run on the embedded PostgreSQL."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tickwork import App

app = App()


@app.task(name="e2e.quick")
def quick() -> None:
    """Returns at once: its thread stays in the pool, idle."""


@app.task(name="e2e.stuck")
def stuck() -> None:
    """Marks that it runs (the file ``E2E_STUCK_MARK``), then never returns: only the end of
    the process ends it."""
    Path(os.environ["E2E_STUCK_MARK"]).touch()
    threading.Event().wait()
