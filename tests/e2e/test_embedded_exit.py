"""The embedded PostgreSQL is stopped when the last process using it exits, however it exits:
past a sync handler that is still running (``os._exit``), or after the one before it was
killed. Real processes on an embedded server of their own, in the test's directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import HANG_GUARD, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).resolve().parent
APP = "exit_app:app"


class Embedded:
    """``tickwork`` processes sharing one embedded server in ``tmp``, and that server."""

    def __init__(self, tmp: Path, home: Path) -> None:
        self.tmp = tmp
        self.data_dir = home / "pgdata"
        self.mark = tmp / "stuck.mark"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        self.env |= {
            "TICKWORK_DATA_DIR": str(self.data_dir),  # no URL: the embedded server
            "TICKWORK_WORKER__SHUTDOWN_GRACE": "0",
            "TICKWORK_ADMIN_EMAIL": "root@example.com",
            "TICKWORK_ADMIN_PASSWORD": "correct horse battery staple",
            "E2E_STUCK_MARK": str(self.mark),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(E2E_DIR), os.environ.get("PYTHONPATH")) if p
            ),
        }
        self.logs: dict[subprocess.Popen[bytes], Path] = {}

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{name}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tickwork", *args],
            env=self.env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=self.tmp,
        )
        self.logs[proc] = log
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return self.logs[proc].read_text(errors="replace")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tickwork", *args],
            env=self.env,
            capture_output=True,
            text=True,
            cwd=self.tmp,
            timeout=HANG_GUARD,
            check=False,
        )

    def server_pid(self) -> int | None:
        """The postmaster's pid while the server runs (its pid file is removed at stop)."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except FileNotFoundError:
            return None

    def close(self) -> None:
        for proc in self.logs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(HANG_GUARD)
        pid = self.server_pid()
        if pid is not None:  # left running by a failed test: a fast shutdown
            os.kill(pid, signal.SIGINT)
            wait_for(lambda: self.server_pid() is None, "the embedded server to stop")


@pytest.fixture
def embedded(tmp_path: Path, embedded_home: Path) -> Iterator[Embedded]:
    fixture = Embedded(tmp_path, embedded_home)
    try:
        yield fixture
    finally:
        fixture.close()


@pytest.mark.parametrize(
    ("command", "ready"),
    [
        (("worker", "--app", APP, "--concurrency", "4"), "worker started"),
        (("serve", "--app", APP, "--concurrency", "4", "--port", "0"), "roles: "),
    ],
    ids=["worker", "serve"],
)
def test_exit_past_a_running_sync_handler_stops_the_embedded_server(
    embedded: Embedded, command: tuple[str, ...], ready: str
) -> None:
    proc = embedded.start(command[0], *command)
    wait_for(lambda: ready in embedded.log(proc) or proc.poll() is not None, "the process to start")
    assert proc.poll() is None, embedded.log(proc)
    for task in ("e2e.quick", "e2e.quick", "e2e.stuck"):
        enqueued = embedded.run("jobs", "enqueue", task)
        assert enqueued.returncode == 0, enqueued.stderr
    wait_for(embedded.mark.exists, "the stuck handler to run")
    server = embedded.server_pid()
    assert server is not None

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG_GUARD) == 0
    assert embedded.server_pid() is None, "the embedded server was left running"
    log = embedded.log(proc)
    # one handler runs; the idle threads of the quick jobs are not counted
    assert "exiting with sync handlers still running handlers=1" in log, log


def test_a_later_command_stops_the_server_of_a_killed_process(embedded: Embedded) -> None:
    worker = embedded.start("worker", "worker", "--app", APP)
    wait_for(lambda: "worker started" in embedded.log(worker), "the worker to start")
    worker.kill()  # no exit handler runs: its handle on the server stays behind
    worker.wait(HANG_GUARD)
    assert embedded.server_pid() is not None

    listed = embedded.run("queues", "list")
    assert listed.returncode == 0, listed.stderr
    assert embedded.server_pid() is None, "the embedded server was left running"
