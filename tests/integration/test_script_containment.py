"""A script run cannot outlive, out-see or out-fill its run: real scripts try what an
attacker's would (``setsid`` in its three forms, a Python fork + ``setsid``, reading another
run's environment through ``/proc``, filling ``/tmp`` and ``/dev/shm``, holding processes),
and the machine is looked at from outside afterwards (docs/definitions.md, "Script runs and
their isolation")."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwork.config import ScriptRuntimeSettings
from tickwork.definitions.templates import Variables
from tickwork.errors import ConfigError, RunFailed
from tickwork.runtimes import sandbox
from tickwork.runtimes import script as script_runtime

from ..processes import kill_marked, marked

contained = pytest.mark.skipif(
    not sandbox.containment(ScriptRuntimeSettings()).namespaces,
    reason="this machine cannot make a run's namespaces (docs/definitions.md: the fallback)",
)


@pytest.fixture
def marker() -> Iterator[str]:
    """A word only this test's script processes carry in their command line."""
    made = f"tickwork-escape-{secrets.token_hex(6)}"
    yield made
    kill_marked(made)


def settings(**fields: Any) -> ScriptRuntimeSettings:
    return ScriptRuntimeSettings(kill_grace=0.5, **fields)


async def run(
    language: str,
    source: str,
    *,
    exec_timeout: float = 60,
    variables: Variables | None = None,
    names: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    spec = {"language": language, "source": source, "variables": names or []}
    return await script_runtime.run(
        spec,
        exec_timeout=exec_timeout,
        variables=variables or Variables({}),
        settings=settings(**fields),
    )


ESCAPES = {
    "setsid-background": ("bash", "setsid sh -c 'sleep 1000; : {m}' &\necho left"),
    "setsid-fork": ("bash", "setsid -f sh -c 'sleep 1000; : {m}'\necho left"),
    "setsid-subshell": ("bash", "( setsid sh -c 'sleep 1000; : {m}' & )\necho left"),
    "python-fork-setsid": (
        "python",
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    os.execv('/bin/sh', ['sh', '-c', 'sleep 1000; : {m}'])\n"
        "print('left')\n",
    ),
}


@contained
@pytest.mark.parametrize("form", list(ESCAPES))
async def test_a_process_that_left_the_scripts_session_ends_with_the_run(
    form: str, marker: str
) -> None:
    language, source = ESCAPES[form]
    done = await run(language, source.replace("{m}", marker))
    assert done["stdout"] == "left\n"
    assert marked(marker) == []  # gone when the run returned: no wait, no grace


@contained
async def test_a_process_that_left_the_scripts_session_ends_at_the_timeout(
    marker: str,
) -> None:
    source = f"setsid -f sh -c 'sleep 1000; : {marker}'\nsleep 1000 # {marker}\n"
    with pytest.raises(RunFailed, match="longer than exec_timeout"):
        await run("bash", source, exec_timeout=1)
    assert marked(marker) == []


@contained
async def test_a_run_cannot_read_another_runs_environment_or_see_its_processes(
    shared_dir: Path,
) -> None:
    secret = f"s3cret-{secrets.token_hex(8)}"
    holder = (
        f"touch {shared_dir}/holding\nwhile [ ! -e {shared_dir}/looked ]; do sleep 0.01; done\n"
    )
    looker = (
        f"while [ ! -e {shared_dir}/holding ]; do sleep 0.01; done\n"
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c s3cret- || true\n"
        "ls /proc | grep -c '^[0-9]'\n"
        f"touch {shared_dir}/looked\n"
    )
    held = asyncio.create_task(
        run(
            "bash",
            holder,
            variables=Variables({"api.token": secret}, secrets=(secret,)),
            names=["api.token"],
        )
    )
    try:
        looked = await run("bash", looker)
    finally:
        (shared_dir / "looked").touch()
        await held
    found, processes = looked["stdout"].split()
    assert found == "0"  # the holder's environment is nowhere in the looker's /proc
    assert int(processes) < 10  # its own few: timeout, bash, the pipeline


@contained
async def test_temp_space_is_the_runs_own_capped_and_gone_after_it(marker: str) -> None:
    places = ("/tmp", "/var/tmp", "/dev/shm")
    source = "".join(f"echo kept > {place}/{marker}\n" for place in places) + (
        f"head -c 16M /dev/zero > /dev/shm/{marker}-big\n"
    )
    with pytest.raises(RunFailed, match="No space left on device"):
        await run("bash", source, tmp_bytes=8 * 1024**2)
    left = [name for place in places for name in os.listdir(place) if marker in name]
    assert left == []


@contained
async def test_empty_files_beyond_the_temp_spaces_share_fail_too() -> None:
    source = "i=0; while [ $i -lt 5000 ]; do : > /tmp/f$i || exit 3; i=$((i+1)); done"
    with pytest.raises(RunFailed, match="No space left on device"):
        await run("bash", source, tmp_bytes=1024**2)


@contained
async def test_a_script_sees_its_work_directory_and_temp_space() -> None:
    source = "pwd; echo \"$HOME $TMPDIR\"; echo *; df -k /tmp | tail -1 | awk '{print $2}'\n"
    done = await run("bash", source, tmp_bytes=8 * 1024**2)
    cwd, home_tmp, listing, size = done["stdout"].split("\n", 3)
    assert cwd == sandbox.WORK_DIR and home_tmp == f"{sandbox.WORK_DIR} /tmp"
    assert "script.sh" in listing and "trigger.json" in listing
    assert size.split()[-1] == str(8 * 1024)


@contained
@pytest.mark.skipif(
    sandbox.containment(ScriptRuntimeSettings()).cgroups is None,
    reason="a per-run process cap needs a writable pids cgroup (root, cgroup v1)",
)
async def test_a_run_holding_many_processes_does_not_stop_another(
    shared_dir: Path, marker: str
) -> None:
    # a uid of this test's own (like the fork bomb's): before per-run caps, the limit
    # counted every process of the script user on the machine
    own = {"processes": 64, "uid": 1_100_000 + os.getpid()}
    holder = (
        f"i=0; while [ $i -lt 60 ]; do (exec -a {marker} sleep 1000) & i=$((i+1)); done\n"
        f"touch {shared_dir}/holding\n"
        f"while [ ! -e {shared_dir}/ran ]; do sleep 0.01; done\n"
    )
    held = asyncio.create_task(run("bash", holder, **own))
    try:
        other = await run(
            "bash",
            f"while [ ! -e {shared_dir}/holding ]; do sleep 0.01; done\nsh -c 'echo ran'",
            **own,
        )
        assert other["stdout"] == "ran\n"
    finally:
        (shared_dir / "ran").touch()
        await held
    assert marked(marker) == []


async def test_the_process_group_fallback_runs_and_says_what_it_does_not_contain(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox._found.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="tickwork.runtimes"):
            done = await run("bash", 'echo "$TMPDIR"', isolation="process_group")
    finally:
        sandbox._found.cache_clear()
    assert done["stdout"].startswith(f"{tempfile.gettempdir()}/{script_runtime.WORKDIR_PREFIX}")
    [warned] = [
        r for r in caplog.records if r.getMessage() == "script runs are not fully contained"
    ]
    assert "setsid" in warned.__dict__["not_contained"]


def test_namespaces_asked_for_where_the_machine_cannot_are_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox._found.cache_clear()
    monkeypatch.setattr(sandbox, "_cannot_unshare", lambda as_root: "unshare failed: EPERM")
    try:
        with pytest.raises(ConfigError, match=r"runtimes\.scripts\.isolation.*EPERM"):
            sandbox.containment(settings(isolation="namespaces"))
        assert not sandbox.containment(settings()).namespaces  # auto: the fallback
    finally:
        sandbox._found.cache_clear()


@contained
async def test_a_cancelled_run_ends_with_everything_it_started(marker: str) -> None:
    started = asyncio.Event()
    source = (
        f"setsid -f sh -c 'trap \"\" TERM; sleep 1000; : {marker}'\n"
        f"trap '' TERM\necho started\n(exec -a {marker} sleep 1000)\n"
    )
    spec = {"language": "bash", "source": source, "variables": []}
    running = asyncio.create_task(
        script_runtime.run(
            spec,
            exec_timeout=600,
            variables=Variables({}),
            settings=settings(),
            report=lambda out, err, size: started.set(),
        )
    )
    await started.wait()
    running.cancel()  # a cancel, a shutdown: SIGTERM (ignored here), SIGKILL after the grace
    with pytest.raises(asyncio.CancelledError):
        await running
    assert marked(marker) == []


PRELOAD = r"""
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
    char line[32];
    int fd = open(LOADED, O_WRONLY | O_APPEND);
    if (fd >= 0) {
        snprintf(line, sizeof line, "%d\n", (int)geteuid());
        write(fd, line, strlen(line));
        close(fd);
    }
}
"""


@pytest.fixture
def preload(shared_dir: Path) -> tuple[Path, Path]:
    """A library that, loaded into a process, appends its effective uid to a file: the
    library and the file."""
    if shutil.which("cc") is None:
        pytest.skip("builds a library to preload (cc)")
    loaded = shared_dir / "loaded"
    loaded.touch()
    loaded.chmod(0o666)
    source = shared_dir / "preload.c"
    source.write_text(PRELOAD)
    library = shared_dir / "preload.so"
    built = subprocess.run(
        ["cc", "-shared", "-fPIC", f'-DLOADED="{loaded}"', "-o", str(library), str(source)],
        capture_output=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    library.chmod(0o755)
    return library, loaded


@contained
async def test_a_scripts_environment_never_reaches_what_runs_as_root(
    preload: tuple[Path, Path],
) -> None:
    """The namespaces are made as root: a variable such as LD_PRELOAD reaches the script
    (as the script user), never ``unshare``, ``mount`` or ``setpriv``."""
    library, loaded = preload
    done = await run(
        "bash",
        "echo ran",
        variables=Variables({"LD_PRELOAD": str(library)}),
        names=["LD_PRELOAD"],
    )
    assert done["stdout"] == "ran\n"
    euids = loaded.read_text().split()
    assert euids and "0" not in euids, euids


async def test_a_variables_value_reaches_the_script_byte_for_byte() -> None:
    odd = "it's $(id) `id` \\ \"q\"\nline two\n'"
    done = await run(
        "python",
        "import os, sys; sys.stdout.write(os.environ['odd_value'])",
        variables=Variables({"odd.value": odd}),
        names=["odd.value"],
    )
    assert done["stdout"] == odd


async def test_a_script_sees_exactly_the_allowed_environment() -> None:
    done = await run(
        "python",
        "import os; print(' '.join(sorted(os.environ)))",
        variables=Variables({"region.name": "eu-1"}),
        names=["region.name"],
    )
    assert done["stdout"].split() == [
        "HOME", "LANG", "PATH", "TICKWORK_TRIGGER", "TMPDIR", "region_name"
    ]  # fmt: skip


def test_an_environment_name_the_shell_cannot_export_is_refused() -> None:
    assert sandbox.environment({"A_1": "it's"}) == b"export A_1='it'\\''s'\n"
    for bad in ("1A", "A B", "A;id", "A=B", ""):
        with pytest.raises(ValueError, match="cannot be exported"):
            sandbox.environment({bad: "x"})


def test_a_cgroup_a_killed_worker_left_is_removed_at_the_next_start() -> None:
    parent = sandbox.containment(settings()).cgroups
    if parent is None:
        pytest.skip("no writable pids cgroup here (root, cgroup v1)")
    dead = subprocess.Popen(["true"])  # a pid no process has any more
    dead.wait()
    left = parent / f"{sandbox.CGROUP_PREFIX}{dead.pid}-left"
    mine = parent / f"{sandbox.CGROUP_PREFIX}{os.getpid()}-mine"  # a live worker's run
    left.mkdir()
    mine.mkdir()
    try:
        sandbox._found.cache_clear()
        sandbox.containment(settings())
        assert not left.exists() and mine.exists()
    finally:
        sandbox._found.cache_clear()
        for made in (left, mine):
            if made.exists():
                made.rmdir()
