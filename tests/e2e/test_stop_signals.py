"""A worker or serve process told to stop while it is still starting stops cleanly once it
has started (it is not killed half-started), and SIGHUP (its terminal closed) stops it like
SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .support import HANG_GUARD, free_port, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent


def _ignore_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as `nohup` starts a command


def _default_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start(
    db_env: dict[str, str], tmp_path: Path, *args: str, ignore_hangup: bool = False
) -> subprocess.Popen[bytes]:
    env = dict(
        db_env,
        TICKWORK_TEST_STARTED=str(tmp_path / "started"),
        TICKWORK_TEST_GO=str(tmp_path / "go"),
        TICKWORK_ADMIN_EMAIL="root@example.com",
        TICKWORK_ADMIN_PASSWORD="correct horse battery staple",
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
    )
    log = (tmp_path / "process.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "tickwork", *args, "--app", "slow_start_app:app"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        # as `nohup` starts it (SIGHUP ignored from the start), or as a terminal does: with
        # SIGHUP's default, whatever this test run inherited (a suite run under nohup would
        # otherwise pass its ignored SIGHUP on to every process it starts)
        preexec_fn=_ignore_hangup if ignore_hangup else _default_hangup,
    )


@pytest.mark.parametrize("command", [["worker"], ["serve", "--port", "0"]])
def test_a_stop_signal_during_start_up_stops_the_process_cleanly_once_started(
    db_env: dict[str, str], tmp_path: Path, clean: None, command: list[str]
) -> None:
    process = start(db_env, tmp_path, *command)
    try:
        wait_for((tmp_path / "started").exists, "the app's import to begin")
        process.send_signal(signal.SIGTERM)  # still importing the app: no event loop yet
        (tmp_path / "go").touch()
        assert process.wait(HANG_GUARD) == 0, (tmp_path / "process.log").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "stop requested signal=SIGTERM" in (tmp_path / "process.log").read_text()


def test_sighup_stops_serve_like_sigterm(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    (tmp_path / "go").touch()
    process = start(db_env, tmp_path, "serve", "--port", str(free_port()))
    try:
        wait_for(
            lambda: "serving on" in (tmp_path / "process.log").read_text(), "serve to be ready"
        )
        process.send_signal(signal.SIGHUP)
        assert process.wait(HANG_GUARD) == 0, (tmp_path / "process.log").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "stop requested signal=SIGHUP" in (tmp_path / "process.log").read_text()


def test_a_worker_started_ignoring_sighup_keeps_ignoring_it(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    (tmp_path / "go").touch()
    process = start(db_env, tmp_path, "worker", ignore_hangup=True)
    try:
        wait_for(
            lambda: "worker started" in (tmp_path / "process.log").read_text(),
            "the worker to start",
        )
        process.send_signal(signal.SIGHUP)  # ignored, as nohup asked
        process.send_signal(signal.SIGTERM)  # delivered after it: this one stops it
        assert process.wait(HANG_GUARD) == 0, (tmp_path / "process.log").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = (tmp_path / "process.log").read_text()
    assert "stop requested signal=SIGTERM" in log and "SIGHUP" not in log
