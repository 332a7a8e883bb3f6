"""Helpers for tests that look at processes (a script's, a worker's) from outside."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, ended and waiting for its parent, has ended)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def marked(marker: str) -> list[int]:
    """The processes on this machine whose command line holds ``marker`` (the test's own
    excepted): what a script started, seen from outside whatever namespace it ran in."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if marker.encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> None:
    """End what :func:`marked` finds (a test's cleanup when a script escaped)."""
    for pid in marked(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
