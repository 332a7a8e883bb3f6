"""The tickwork processes of a network test: each runs on a host (in its namespace) with
``ip netns exec``, logs to its own file, and is killed when the test ends."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .netns import Host, Network

E2E_DIR = Path(__file__).resolve().parent.parent / "e2e"
"""Where worker_app.py is (the app the worker processes load)."""
HANG_GUARD = 90.0
"""Not a timing assertion: only stops a broken test from hanging."""

PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the test process dies (it survives the exec
    of ``ip netns exec`` into Python)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Process:
    """One ``tickwork`` process on a host."""

    name: str
    host: Host
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 30) -> str:
        text = "\n".join(self.log().splitlines()[-lines:])
        return f"--- {self.name} on {self.host.name} (pid {self.pid}) ---\n{text}"


@dataclass
class Fleet:
    """Hosts on ``network`` and the processes a test starts on them."""

    network: Network
    env: dict[str, str]
    log_dir: Path
    processes: list[Process] = field(default_factory=list)

    def host(self) -> Host:
        """A new host on the network."""
        return self.network.add_host()

    def start(self, host: Host, name: str, *args: str, **settings: str | float) -> Process:
        """``python -m tickwork ARGS`` on ``host``; ``settings`` are ``TICKWORK_*`` variables
        (``WORKER__LEASE_TTL=2`` sets ``TICKWORK_WORKER__LEASE_TTL``)."""
        return self.run(host, name, "-m", "tickwork", *args, **settings)

    def run(self, host: Host, name: str, *args: str, **settings: str | float) -> Process:
        """``python ARGS`` on ``host`` (see :meth:`start`)."""
        env = dict(self.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(E2E_DIR), env.get("PYTHONPATH")) if p)
        env["PGAPPNAME"] = name
        env.update({f"TICKWORK_{key}": str(value) for key, value in settings.items()})
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                host.command(sys.executable, *args),
                env=env,
                cwd=self.log_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        process = Process(name, host, popen, log_path)
        self.processes.append(process)
        return process

    def worker(
        self, host: Host, name: str, concurrency: int = 4, **settings: str | float
    ) -> Process:
        """``tickwork worker`` of the worker app on the ``default`` queue."""
        return self.start(
            host,
            name,
            *("worker", "--app", "worker_app:app", "--queues", "default"),
            *("--concurrency", str(concurrency), "--log-level", "INFO"),
            **settings,
        )

    def assert_alive(self) -> None:
        for process in self.processes:
            if not process.alive():
                raise AssertionError(f"{process.name} exited\n{process.tail()}")

    def logs(self) -> str:
        return "\n".join(process.tail() for process in self.processes)

    def close(self) -> None:
        for process in self.processes:
            if process.alive():
                process.popen.kill()
            try:
                process.popen.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                print(f"{process.name} (pid {process.pid}) could not be reaped")
            print(f"{process.name}: exit {process.popen.returncode}, log {process.log_path}")
        self.network.remove_hosts()


def wait_until(predicate, what: str, timeout: float = HANG_GUARD, guard=None, detail=None):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy, and return that; ``guard`` runs
    before each poll and may raise (a process that died)."""
    deadline = time.monotonic() + timeout
    while True:
        if guard is not None:
            guard()
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting until {what}{extra}")
        time.sleep(0.05)


def worker_id(sql: Any, process: Process) -> Any:
    """The id ``process`` registered under in the workers table, once it has."""
    return wait_until(
        lambda: (
            sql.execute(
                "SELECT id FROM workers WHERE pid = %s ORDER BY started_at DESC LIMIT 1",
                [process.pid],
            ).fetchone()
            or [None]
        )[0],
        f"{process.name} is registered",
    )
