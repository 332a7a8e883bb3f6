"""What contains one script run, on this machine.

With namespaces (the default where the machine can make them), util-linux's ``unshare``
starts each run in its own PID, mount and IPC namespaces. The run's first process is the
namespace's init: when it ends (the script ended, or ``timeout`` ended it, or the worker
killed ``unshare``), the kernel kills every process left in the namespace, whatever
session or group it moved to (``setsid``, a double fork). ``/proc`` is mounted afresh, so a
run sees its own processes only, never another run's environment. ``/tmp``, ``/var/tmp``,
``/dev/shm`` and ``/run/lock`` are one fresh tmpfs of ``tmp_bytes`` (the working directory
is in it too), gone when the namespace is. As root, a pids cgroup of the run's own caps its
processes (``processes``), so one run holding many never stops another's forks; then
``setpriv`` drops to the script user. A worker that is not root makes the namespaces inside
a user namespace (where the machine allows it), without the cgroup.

Where neither works, the run is contained by its process group and ``timeout`` only (the
``process_group`` isolation), and the worker says so once, at start-up, naming what is not
contained (docs/definitions.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tickwork.config import ScriptRuntimeSettings
from tickwork.errors import ConfigError

__all__ = [
    "WORK_DIR",
    "Containment",
    "command",
    "containment",
    "end",
    "environment",
    "remove_cgroup",
    "run_cgroup",
]

log = logging.getLogger("tickwork.runtimes")

TEMP_ROOT = "/tmp"
WORK_DIR = "/tmp/work"
"""A contained run's working directory (its ``HOME``), inside its temp space."""
SHARED_TEMP_DIRS = ("/var/tmp", "/dev/shm", "/run/lock")
"""The other directories any user may write to on a Debian system: the run's temp space
too (bound onto each that exists)."""
INODE_BYTES = 4096
"""A run's temp space holds one file (inode) per this many bytes of it: empty files cost
the kernel memory the size does not count."""
CGROUP_PREFIX = "tickwork-run-"
STALE_CGROUP = 2 * 3600.0
"""A run's cgroup older than this was left by a killed worker (see script.STALE_AFTER);
so was one whose worker (named in it) is gone."""
NAMESPACES = (
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--mount",
    "--ipc",
    "--propagation",
    "private",
)
STAGE = r"""set -eu
cgroup=$1 size=$2 inodes=$3 uid=$4 gid=$5
shift 5
if [ -n "$cgroup" ]; then echo $$ > "$cgroup/cgroup.procs"; fi
mount -t tmpfs -o "size=$size,nr_inodes=$inodes,mode=1777,nosuid,nodev" tickwork-run /tmp
for shared in /var/tmp /dev/shm /run/lock; do
  if [ -d "$shared" ] && [ ! -L "$shared" ]; then mount --bind /tmp "$shared"; fi
done
install -d -m 0700 -o "$uid" -g "$gid" /tmp/work
install -m 0600 -o "$uid" -g "$gid" -- * /tmp/work/
cd /tmp/work
exec "$@"
"""
"""The namespace's first process, as root in it: join the run's cgroup (before anything
forks), mount the temp space, copy the run's files in from the worker's working directory
(the current directory, still reached under the new ``/tmp``), and become the script user.
Its environment is :data:`ROOT_ENV` alone: nothing of the script's reaches a program that
runs as root (a variable named ``LD_PRELOAD`` would load a library into ``mount``)."""
ENV_STAGE = r"""text=
while IFS= read -r line; do text="$text$line
"; done
exec </dev/null
unset PWD OLDPWD
eval "$text"
exec "$@"
"""
"""As the script user: the script's environment read from stdin (:func:`environment`, shell
``export`` lines, nothing on disk or in a command line), then ``prlimit`` and the script."""
ROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
"""The environment ``unshare`` starts with (what runs as root sees)."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class Containment:
    """What this machine contains a script run with."""

    namespaces: bool
    """Each run in its own PID, mount and IPC namespaces, with a private temp space."""
    as_root: bool
    """The namespaces are made as root (else in a user namespace, as the worker's user)."""
    cgroups: Path | None
    """The pids cgroup each run gets its own child of (None: no per-run process cap)."""
    missing: tuple[str, ...]
    """What is not contained, in words (logged once at start-up)."""


def containment(settings: ScriptRuntimeSettings) -> Containment:
    """How runs are contained here (found once a process; the first time, a warning naming
    what is not contained). ConfigError when ``isolation`` is ``namespaces`` and this
    machine cannot make them."""
    found = _found(settings.isolation)
    if settings.isolation == "namespaces" and not found.namespaces:
        raise ConfigError(
            "runtimes.scripts.isolation ('namespaces'): this machine cannot make a run's "
            f"namespaces ({'; '.join(found.missing)}); set it to 'auto' or 'process_group'"
        )
    return found


@functools.cache
def _found(isolation: str) -> Containment:
    found = _probe(isolation)
    if found.missing:
        log.warning(
            "script runs are not fully contained",
            extra={"isolation": isolation, "not_contained": "; ".join(found.missing)},
        )
    return found


def _probe(isolation: str) -> Containment:
    lost_namespaces = (
        "processes that leave the script's process group (setsid) outlive the run",
        "runs as the same user see each other's processes and environments in /proc",
        "/tmp, /var/tmp, /dev/shm and /run/lock are the machine's: what a run writes there "
        "stays, limited per file only",
    )
    if isolation == "process_group":
        return Containment(False, False, None, lost_namespaces)
    as_root = os.geteuid() == 0
    tools = ("unshare", "setpriv", "install", "mount")
    absent = [tool for tool in tools if shutil.which(tool, path=ROOT_ENV["PATH"]) is None]
    why = f"{', '.join(absent)} not installed (util-linux, coreutils)" if absent else None
    why = why or _cannot_unshare(as_root)
    if why is not None:
        return Containment(False, False, None, (f"no namespaces: {why}", *lost_namespaces))
    cgroups = _cgroups() if as_root else None
    missing: tuple[str, ...] = () if cgroups is not None else (
        "no per-run process cap: RLIMIT_NPROC counts every process of the script user, so "
        "a run holding many processes makes other runs' forks fail while it runs",
    )  # fmt: skip
    if not as_root:
        missing += ("scripts run as the worker's user (mapped to root in their namespace)",)
    return Containment(True, as_root, cgroups, missing)


def _cannot_unshare(as_root: bool) -> str | None:
    """Why this process cannot make a run's namespaces and mount in them (None: it can)."""
    user = () if as_root else ("--user", "--map-root-user")
    try:
        made = subprocess.run(
            ["unshare", *user, *NAMESPACES, "--", "mount", "-t", "tmpfs", "-o", "size=1m",
             "tickwork-probe", "/tmp"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ROOT_ENV,
            timeout=10,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if made.returncode != 0:
        said = made.stderr.decode(errors="replace").strip()[:200]
        return f"unshare {'--user ' if user else ''}failed: {said}"
    return None


def _cgroups() -> Path | None:
    """This process's cgroup in a writable v1 pids hierarchy, stale run cgroups swept;
    None when there is none (cgroup v2 without delegation, a read-only /sys)."""
    mount = next(
        (
            Path(fields[1])
            for fields in (line.split() for line in _read("/proc/self/mounts").splitlines())
            if len(fields) > 3 and fields[2] == "cgroup" and "pids" in fields[3].split(",")
        ),
        None,
    )
    own = next(
        (
            line.split(":", 2)[2]
            for line in _read("/proc/self/cgroup").splitlines()
            if "pids" in line.split(":", 2)[1].split(",")
        ),
        None,
    )
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    _sweep(parent)
    try:
        probe = run_cgroup(parent, 1)
    except OSError:
        return None
    remove_cgroup(probe)
    return parent


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _sweep(parent: Path) -> None:
    """Remove the run cgroups killed workers left: the worker that made one (its pid is in
    the name) is gone, or it is older than any run. A cgroup a process is in is never
    removed (the kernel refuses)."""
    cutoff = time.time() - STALE_CGROUP
    for left in parent.glob(f"{CGROUP_PREFIX}*"):
        maker = left.name.removeprefix(CGROUP_PREFIX).split("-", 1)[0]
        with contextlib.suppress(OSError, ValueError):
            if not Path(f"/proc/{int(maker)}").exists() or left.stat().st_mtime < cutoff:
                left.rmdir()


def run_cgroup(parent: Path, processes: int) -> Path:
    """A new pids cgroup for one run, capped at ``processes``."""
    made = parent / f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    made.mkdir()
    try:
        (made / "pids.max").write_text(str(processes))
    except OSError:
        made.rmdir()
        raise
    return made


def remove_cgroup(made: Path) -> None:
    """Remove a run's cgroup once its namespace is gone (the kernel has reaped every
    process in it by the time ``unshare`` returns; a few tries for the last exits)."""
    for _ in range(50):
        try:
            made.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
            continue
        return
    log.warning("a script run's cgroup could not be removed", extra={"cgroup": str(made)})


def command(
    found: Containment,
    settings: ScriptRuntimeSettings,
    cgroup: Path | None,
    limits: Sequence[str],
    script: Sequence[str],
) -> list[str]:
    """The argv of one contained run: ``limits`` (prlimit's), then ``script`` (``timeout``
    and the interpreter) as the script user, in the run's namespaces."""
    user = () if found.as_root else ("--user", "--map-root-user")
    uid, gid = (settings.uid, settings.gid) if found.as_root else (0, 0)
    drop = [
        "setpriv",
        *((f"--reuid={uid}", f"--regid={gid}", "--clear-groups") if found.as_root else ()),
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]
    return [
        "unshare",
        *user,
        *NAMESPACES,
        "--",
        "/bin/sh",
        "-c",
        STAGE,
        "tickwork-run",
        str(cgroup or ""),
        str(settings.tmp_bytes),
        str(max(settings.tmp_bytes // INODE_BYTES, 1024)),
        str(uid),
        str(gid),
        *limits,
        *drop,
        "/bin/sh",
        "-c",
        ENV_STAGE,
        "tickwork-env",
        *limits,
        *script,
    ]


def environment(env: Mapping[str, str]) -> bytes:
    """The script's environment as :data:`ENV_STAGE` reads it: one ``export`` a variable,
    each value single-quoted (a quote in it closed, escaped and reopened). ValueError on a
    name the shell cannot export."""
    lines = []
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"environment name {name[:64]!r} cannot be exported")
        quoted = value.replace("'", "'\\''")
        lines.append(f"export {name}='{quoted}'\n")
    return "".join(lines).encode()


def end(unshare_pid: int) -> bool:
    """SIGKILL a run's namespace init (``unshare``'s one child): the kernel then kills every
    process of the namespace, and ``unshare`` returns only once they are all gone. False
    when there is none to kill (it ended already, or this kernel does not list children)."""
    try:
        children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
    except OSError:
        return False
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
    return bool(children)
