"""Figures for docs/reliability.md and docs/security.md, recorded by the tests that prove them.

A test asserts its invariant (0 jobs lost, 0 answers of 500) and also records what it
measured with :func:`record`. Nothing is written unless ``TICKWORK_FIGURES`` names a file:
``benchmarks/figures.py`` sets it, runs the tests and turns the lines into the tables of the
two documents. ``TICKWORK_FIGURES_SCALE=long`` makes the tests that take a size from
:func:`scale` run their long version (more kills, more jobs, longer runs).
"""

from __future__ import annotations

import json
import os
import platform
import time
from typing import Any

SCALE_ENV = "TICKWORK_FIGURES_SCALE"
FILE_ENV = "TICKWORK_FIGURES"


def long_run() -> bool:
    """True when the long versions were asked for."""
    return os.environ.get(SCALE_ENV, "short") == "long"


def scale(short: int, long: int) -> int:
    """``short`` on every CI run, ``long`` when the long versions were asked for."""
    return long if long_run() else short


def record(doc: str, check: str, figure: str, value: Any, **details: Any) -> None:
    """One figure: ``doc`` ("reliability" or "security"), the check it belongs to (a row of
    the document's table), what it counts, and its value; ``details`` are shown beside it."""
    path = os.environ.get(FILE_ENV)
    if not path:
        return
    line = {
        "doc": doc,
        "check": check,
        "figure": figure,
        "value": value,
        "details": details,
        "scale": "long" if long_run() else "short",
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, default=str) + "\n")
