"""Red team, round two: a contained script run tries what an attacker's would beyond the
escapes the containment tests cover (unmounting its temp space, a user namespace of its
own to do it in, the cgroup it was put in, the host's processes, a signal to every
process it may reach, setuid helpers) and the machine is looked at afterwards."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwork.config import ScriptRuntimeSettings
from tickwork.definitions.templates import Variables
from tickwork.runtimes import sandbox
from tickwork.runtimes import script as script_runtime

pytestmark = pytest.mark.skipif(
    not sandbox.containment(ScriptRuntimeSettings()).namespaces,
    reason="this machine cannot make a run's namespaces (docs/definitions.md: the fallback)",
)


async def run(source: str, **fields: Any) -> dict[str, Any]:
    spec = {"language": "bash", "source": source, "variables": []}
    return await script_runtime.run(
        spec,
        exec_timeout=60,
        variables=Variables({}),
        settings=ScriptRuntimeSettings(kill_grace=0.5, **fields),
    )


@pytest.fixture
def host_file() -> Iterator[Path]:
    """A file in the machine's /tmp, which a run must not reach."""
    made = Path("/tmp") / f"tickwork-redteam-{secrets.token_hex(6)}"
    made.write_text("host")
    made.chmod(0o644)
    yield made
    made.unlink(missing_ok=True)


async def test_a_run_cannot_unmount_its_temp_space_to_reach_the_machines(
    host_file: Path,
) -> None:
    source = (
        f"umount /tmp 2>/dev/null; cat {host_file} 2>/dev/null || echo hidden\n"
        # a user namespace of its own (root in it) and a mount namespace that it owns
        f"unshare -Urm sh -c 'umount -l /tmp 2>/dev/null; umount /tmp 2>/dev/null; "
        f"cat {host_file} 2>/dev/null || echo hidden' 2>/dev/null || echo refused\n"
    )
    done = await run(source)
    assert "host" not in done["stdout"], done


async def test_a_run_sees_no_process_of_the_machine_and_can_signal_none(tmp_path: Path) -> None:
    source = "ls /proc | grep -c '^[0-9]' \nkill -9 -1 2>/dev/null; echo survived\n"
    done = await run(source)
    count, survived = done["stdout"].split("\n")[:2]
    assert int(count) <= 6  # its own shell, ls, grep and the namespace's init
    assert os.getppid() > 0 and survived in ("survived", "")


async def test_a_run_cannot_leave_its_pids_cgroup_or_raise_its_cap() -> None:
    source = (
        "cg=$(grep pids /proc/self/cgroup | cut -d: -f3)\n"
        "echo $$ > /sys/fs/cgroup/pids/cgroup.procs 2>/dev/null && echo left-root\n"
        "echo max > /sys/fs/cgroup/pids$cg/pids.max 2>/dev/null && echo raised\n"
        "mkdir /sys/fs/cgroup/pids$cg/mine 2>/dev/null && echo made\n"
        "echo done\n"
    )
    done = await run(source)
    assert done["stdout"].strip().splitlines() == ["done"], done


async def test_setuid_programs_give_a_run_no_privilege() -> None:
    source = (
        "for p in /usr/bin/su /usr/bin/passwd /usr/bin/mount /usr/bin/newgrp /bin/su; do\n"
        '  [ -u "$p" ] && echo "setuid $p"\n'
        "done\n"
        "grep NoNewPrivs /proc/self/status\n"
        "grep CapEff /proc/self/status\n"
        "id -u\n"
    )
    done = await run(source)
    out = done["stdout"]
    assert "NoNewPrivs:\t1" in out and "CapEff:\t0000000000000000" in out, out
    assert out.strip().splitlines()[-1] != "0"
