"""An app whose import waits for the test (``--app slow_start_app:app``): the process is still
starting while the test signals it. ``TICKWORK_TEST_STARTED`` names the file written when the
import begins, ``TICKWORK_TEST_GO`` the file whose existence lets it finish."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tickwork import App

Path(os.environ["TICKWORK_TEST_STARTED"]).write_text("importing")
_deadline = time.monotonic() + 120  # only stops a broken test from hanging
while not Path(os.environ["TICKWORK_TEST_GO"]).exists() and time.monotonic() < _deadline:
    time.sleep(0.01)

app = App()


@app.task(name="e2e.slow_start.noop")
def noop() -> None:
    """Nothing: the app needs a task for its worker to claim."""
