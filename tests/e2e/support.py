"""Helpers the end-to-end tests share: run the CLI, wait for a condition in another process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

WORKER_APP = "worker_app:app"
"""The app of tests/e2e/worker_app.py, which worker processes load."""
HANG_GUARD = 90.0
"""Not a timing assertion: only stops a broken test from hanging the run."""


def tickwork(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m tickwork ARGS`` with ``env``; its output captured, never raising."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def worker_command(concurrency: int, log_level: str = "INFO") -> list[str]:
    """``python -m tickwork worker`` on the worker app's ``default`` queue."""
    return [
        sys.executable,
        "-m",
        "tickwork",
        "worker",
        "--app",
        WORKER_APP,
        "--queues",
        "default",
        "--concurrency",
        str(concurrency),
        "--log-level",
        log_level,
    ]


REQUIRE_BROWSER = "TICKWORK_REQUIRE_BROWSER"
"""Set to 1 (``.ci/run`` does), a browser test module that cannot run fails the run instead
of skipping: a green run then says the dashboard was tested."""


def browser_missing(reason: str) -> NoReturn:
    """Skip the calling module (its browser tests cannot run here, for ``reason``); under
    ``TICKWORK_REQUIRE_BROWSER=1``, fail the run at collection instead."""
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{REQUIRE_BROWSER}=1, but the browser tests cannot run: {reason}")
    pytest.skip(reason, allow_module_level=True)


def required_tool(name: str, flag: str, install: str) -> str:
    """The path of the program ``name``; when it is not installed the calling test skips,
    saying ``install``, or fails when the environment variable ``flag`` is 1 (``.ci/run``
    sets it, having installed the program)."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get(flag) == "1":
            pytest.fail(f"{flag}=1, but there is no {name} on PATH")
        pytest.skip(f"{name} is not installed ({install})")
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(predicate: Any, what: str, timeout: float = HANG_GUARD) -> Any:
    """Poll ``predicate`` (state another process changes) until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Processes:
    """``tickwork`` processes a test starts, each logging to its own file; all killed at the
    end (``close``)."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *args: str, **extra_env: str) -> subprocess.Popen[bytes]:
        """``python -m tickwork ARGS`` with the shared environment plus ``extra_env``."""
        log = (self.log_dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tickwork", *args],
            env=self.env | extra_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.log_dir,
        )
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(HANG_GUARD)


@contextlib.contextmanager
def spawner(
    env: dict[str, str], log_dir: Path, *args: str
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``spawn(name, **extra_env)`` starts ``tickwork ARGS`` (logging to ``name``.log); every
    process started is killed on exit."""
    procs = Processes(env, log_dir)
    try:
        yield lambda name, **extra: procs.start(name, *args, **extra)
    finally:
        procs.close()


@contextlib.contextmanager
def serving(
    env: dict[str, str],
    cwd: Path,
    *args: str,
    program: Sequence[str] = (sys.executable, "-m", "tickwork"),
) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """``python -m tickwork serve ARGS --port <free>`` (or ``program serve ...``, another
    installation's) until it prints its ``roles:`` line (ready): the process, its URL and
    what it printed up to then. Stopped with SIGTERM at the end (killed if it does not stop)."""
    port = free_port()
    process = subprocess.Popen(
        [*program, "serve", *args, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        while line := process.stdout.readline():
            lines.append(line)  # up to the line serve prints once it is ready (or its end)
            if line.startswith("roles:"):
                break
        printed = "".join(lines)
        assert lines and lines[-1].startswith("roles:"), printed
        yield process, f"http://127.0.0.1:{port}", printed
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
