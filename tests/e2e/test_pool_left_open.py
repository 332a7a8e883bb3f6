"""A program that ends its event loop with a tickwork pool still open, while the pool is
connecting, ends: the pool's connect task does not swallow the loop's cancellation (which
left ``asyncio.run`` waiting for ever, a doc example hanging under load)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .support import HANG_GUARD

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parent / "pool_left_open.py"


def test_a_loop_that_ends_while_a_pool_connects_ends() -> None:
    ended = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout.strip() == "ended"
    assert "close the App (await app.aclose()) before the loop ends" in ended.stderr
