"""The script runtime: one run of a script definition, isolated.

A script runs in a fresh working directory (removed afterwards), contained as
:mod:`tickwork.runtimes.sandbox` finds this machine can (its own namespaces and temp space,
else its own process group), with an environment built from an allow-list (PATH, LANG, HOME
set to the work directory, TMPDIR) plus the variables it names: never the worker's
environment (its database URL, its secrets). As root, it runs as an unprivileged user
(``runtimes.scripts.uid``/``gid``). Its limits (CPU time, address space, processes, file
size) are set by ``prlimit`` and its time by coreutils' ``timeout``, which ends it at
``exec_timeout`` even when the worker itself was killed meanwhile: no script outlives its
timeout. Output is capped while it streams. When the run is cancelled (a cancel, a shutdown,
the job's own timeout), the group gets SIGTERM, then SIGKILL after ``kill_grace``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickwork.config import ScriptRuntimeSettings
from tickwork.definitions.records import env_name
from tickwork.definitions.templates import Variables
from tickwork.errors import RunFailed, RuntimeMissing
from tickwork.limits import storable
from tickwork.ops import metrics
from tickwork.runtimes import sandbox
from tickwork.worker.progress import PROGRESS_INTERVAL

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
TRIGGER_FILE = "trigger.json"
"""In the work directory: what made the run (``{"via": "webhook", "payload": ...}``, or the
schedule, or the operator who ran it), named by ``$TICKWORK_TRIGGER``."""
TIMED_OUT = 124
"""The exit status of ``timeout`` when the script ran out of time."""
CHUNK = 64 * 1024
FILE_NAMES = {
    "bash": "script.sh",
    "python": "script.py",
    "node": "script.js",
    "typescript": "script.ts",
    "groovy": "script.groovy",
}
JAVA_OPTS = (
    "-Xmx256m -XX:ReservedCodeCacheSize=64m -XX:MaxMetaspaceSize=128m "
    "-XX:CompressedClassSpaceSize=64m -XX:+UseSerialGC -Xshare:off"
)
"""The JVM's reservations kept under the address-space limit (groovy)."""
PACKAGES = {
    "bash": "Debian's bash",
    "python": "Debian's python3",
    "node": "Debian's nodejs",
    "typescript": "esbuild (npm install esbuild) and Debian's nodejs",
    "groovy": "Debian's groovy and a JDK",
}
TOOLS = (("prlimit", "util-linux"), ("timeout", "coreutils"))


@dataclass(frozen=True, slots=True)
class Interpreter:
    """How this machine runs one language."""

    argv: tuple[str, ...]
    env: dict[str, str]
    transpiler: str | None = None


def interpreter(language: str, settings: ScriptRuntimeSettings) -> Interpreter:
    """The language's interpreter on this machine; RuntimeMissing, naming the package, when
    it (or a tool every script needs) is not installed."""
    for tool, package in TOOLS:
        if shutil.which(tool) is None:
            raise RuntimeMissing(language, tool, package)
    runtime = "node" if language == "typescript" else language
    command = getattr(settings, runtime)
    found = shutil.which(command)
    if found is None:
        raise RuntimeMissing(runtime, command, PACKAGES[language])
    if language == "bash":
        return Interpreter((found, "--noprofile", "--norc"), {})
    if language == "python":
        return Interpreter((found, "-I", "-B"), {})
    if language == "groovy":
        java = shutil.which("java")
        if java is None:
            raise RuntimeMissing(language, "java", PACKAGES[language])
        home = str(Path(os.path.realpath(java)).parent.parent)
        return Interpreter((found,), {"JAVA_HOME": home, "JAVA_OPTS": JAVA_OPTS})
    if language == "typescript":
        transpiler = shutil.which(settings.typescript)
        if transpiler is None:
            raise RuntimeMissing("typescript", settings.typescript, PACKAGES[language])
        return Interpreter((found,), {}, transpiler)
    return Interpreter((found,), {})


def _environment(
    spec: Mapping[str, Any],
    workdir: str,
    tmpdir: str,
    variables: Variables,
    extra: Mapping[str, str],
) -> dict[str, str]:
    env = {
        "PATH": BASE_PATH,
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": tmpdir,
        "TICKWORK_TRIGGER": str(Path(workdir, TRIGGER_FILE)),
    }
    for name in spec.get("variables", []):
        env[env_name(name)] = variables.values[name]
    return env | dict(extra)


@dataclass
class _Stream:
    cap: int
    kept: bytearray
    size: int = 0
    tail: bytearray = field(default_factory=bytearray)
    """The last :data:`LIVE_TAIL` bytes, shown while the script runs."""

    async def drain(self, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(CHUNK):
            self.size += len(chunk)
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.tail += chunk[-LIVE_TAIL:]
            del self.tail[:-LIVE_TAIL]

    def text(self) -> str:
        """What was kept, as text PostgreSQL can store (undecodable bytes and NULs as
        U+FFFD)."""
        return storable(self.kept.decode("utf-8", errors="replace"))

    def live(self, variables: Variables) -> str:
        """The tail so far, secrets masked (one may be cut at either edge)."""
        text = storable(self.tail.decode("utf-8", errors="replace"))
        return variables.mask(text, cut=True, cut_before=self.size > len(self.tail))

    def end(self, variables: Variables) -> str:
        """The last :data:`FAILED_TAIL` bytes written, secrets masked (one cut at the start
        too), for a failed run's error: its result, with the whole capped output, is not
        stored."""
        tail = self.tail[-FAILED_TAIL:]
        text = storable(bytes(tail).decode("utf-8", errors="replace"))
        return variables.mask(text, cut_before=self.size > len(tail))


LIVE_TAIL = 4096
"""Bytes of each output stream a running script shows (the whole capped output is its
result when it ends)."""
FAILED_TAIL = 2000
"""Bytes of the end of stdout and of stderr each that a failed run's error keeps."""
Report = Callable[[str, str, int], None]
"""Told the tails of stdout and stderr so far (secrets masked) and the bytes written in all."""


async def _report_live(out: _Stream, err: _Stream, variables: Variables, report: Report) -> None:
    """Tell ``report`` the output's tails whenever more was written, every
    :data:`PROGRESS_INTERVAL` seconds, until cancelled."""
    told = 0
    while True:
        await asyncio.sleep(PROGRESS_INTERVAL)
        if out.size + err.size != told:
            told = out.size + err.size
            report(out.live(variables), err.live(variables), told)


EXIT_POLL = 0.05
"""Seconds between looks at whether a script's process has ended."""


async def _exit_status(proc: asyncio.subprocess.Process, hard_deadline: float) -> int:
    """The script's exit status once its process has ended. Not ``proc.wait()``: that waits
    for the output pipes to close too, which a process the script left behind (in its group
    or out of it) holds open for as long as it runs. Past ``hard_deadline`` (when ``timeout``
    did not end it) the group is killed."""
    while proc.returncode is None:
        if time.monotonic() > hard_deadline:
            _kill_group(proc.pid, signal.SIGKILL)
        await asyncio.sleep(EXIT_POLL)
    return proc.returncode


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write ``data`` to the run's stdin and close it (a run that ended first: nothing)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    stdin.close()


def _close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close this side of the script's pipes: a process that left its group and still
    writes gets EPIPE, and the transport is done with."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


WORKDIR_PREFIX = "tickwork-run-"
STALE_AFTER = 2 * 3600.0
"""A run's working directory older than this (every run ends within the job's timeout,
35 minutes) was left by a worker that was killed: the next run in that place removes it."""
_swept: set[str] = set()


def _sweep_stale(parent: Path | None) -> None:
    """Remove working directories that killed workers left in ``parent`` (once a process)."""
    where = str(parent or tempfile.gettempdir())
    if where in _swept:
        return
    _swept.add(where)
    cutoff = time.time() - STALE_AFTER
    for path in Path(where).glob(f"{WORKDIR_PREFIX}*"):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink() and path.lstat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)


def _prepare(
    parent: Path | None, file_name: str, source: str, trigger: Mapping[str, Any]
) -> tuple[str, Path]:
    """A fresh working directory holding the script and what triggered the run."""
    _sweep_stale(parent)
    workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=parent)
    script = Path(workdir, file_name)
    script.write_text(source, encoding="utf-8")
    Path(workdir, TRIGGER_FILE).write_text(json.dumps(trigger), encoding="utf-8")
    return workdir, script


def _hand_over(workdir: str, owner: tuple[int, int] | None) -> None:
    """The working directory and its files to the script's user, closed to others."""
    if owner is not None:
        for path in (workdir, *(str(p) for p in Path(workdir).iterdir())):
            os.chown(path, *owner)
    os.chmod(workdir, 0o700)


def _clean_up(workdir: str, cgroup: Path | None) -> None:
    """Remove what the worker made for a run: its working directory, its cgroup."""
    shutil.rmtree(workdir, ignore_errors=True)
    if cgroup is not None:
        sandbox.remove_cgroup(cgroup)


def _sandbox(settings: ScriptRuntimeSettings) -> dict[str, Any]:
    """Who the script runs as: an unprivileged user when the worker is root."""
    if os.geteuid() != 0:
        return {}
    return {"user": settings.uid, "group": settings.gid, "extra_groups": []}


async def _transpile(tool: str, source: Path, out: Path, deadline: float) -> None:
    """TypeScript to JavaScript (as the worker: the transpiler only parses; the result runs
    in the sandbox like any script)."""
    proc = await asyncio.create_subprocess_exec(
        tool,
        str(source),
        "--platform=node",
        "--format=cjs",
        "--log-level=error",
        f"--outfile={out}",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"PATH": BASE_PATH},
        process_group=0,
    )
    try:
        async with asyncio.timeout(max(deadline - time.monotonic(), 0.1)):
            output, _ = await proc.communicate()
    except BaseException:
        _kill_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise RunFailed(f"TypeScript did not compile: {output.decode(errors='replace')[:2000]}")


async def run(
    spec: Mapping[str, Any],
    *,
    exec_timeout: float,
    variables: Variables,
    settings: ScriptRuntimeSettings,
    trigger: Mapping[str, Any] | None = None,
    report: Report | None = None,
) -> dict[str, Any]:
    """Run the script; its result (exit code, duration, stdout and stderr, each capped and
    flagged when truncated); RunFailed on a non-zero exit or a timeout. ``trigger`` (what
    made the run) is in the file ``$TICKWORK_TRIGGER`` names; ``report`` is told the
    output's tails while the script runs."""
    language: str = spec["language"]
    found = interpreter(language, settings)
    contained = sandbox.containment(settings)
    started = time.monotonic()
    deadline = started + exec_timeout
    # in namespaces, setpriv drops to the script user after the temp space is mounted
    user = {} if contained.namespaces else _sandbox(settings)
    owner = (settings.uid, settings.gid) if user else None
    cgroup: Path | None = None
    workdir, script = await asyncio.to_thread(
        _prepare, settings.workdir, FILE_NAMES[language], spec["source"], trigger or {}
    )
    try:
        if found.transpiler is not None:
            compiled = Path(workdir, "script.js")
            await _transpile(found.transpiler, script, compiled, deadline)
            script = compiled
        await asyncio.to_thread(_hand_over, workdir, owner)
        if contained.cgroups is not None:
            cgroup = await asyncio.to_thread(
                sandbox.run_cgroup, contained.cgroups, settings.processes
            )
        # the cgroup caps the run's processes; RLIMIT_NPROC, which counts every process of
        # the user, is left at the worker's own hard limit (raising it needs a capability)
        nproc = str(settings.processes)
        if cgroup is not None:
            hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
            nproc = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        limits = (
            "prlimit",
            f"--cpu={settings.cpu_seconds}",
            f"--as={settings.memory_bytes}",
            f"--nproc={nproc}",
            f"--fsize={settings.file_bytes}",
            "--core=0",
            "--",
        )
        seen_dir = sandbox.WORK_DIR if contained.namespaces else workdir
        remaining = max(deadline - time.monotonic(), 0.1)
        timed = (
            "timeout",
            # in namespaces, the end of `timeout` (the namespace's init) ends every process
            # of the run; --foreground keeps it in the group the worker signals
            *(("--foreground",) if contained.namespaces else ()),
            f"--kill-after={settings.kill_grace}s",
            f"{remaining:.3f}s",
            *found.argv,
            str(Path(seen_dir, script.name)),
        )
        argv = (
            sandbox.command(contained, settings, cgroup, limits, timed)
            if contained.namespaces
            else [*limits, *timed]
        )
        tmpdir = sandbox.TEMP_ROOT if contained.namespaces else workdir
        env = _environment(spec, seen_dir, tmpdir, variables, found.env)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            # in namespaces, the script's environment comes on stdin, past what runs as root
            stdin=asyncio.subprocess.PIPE if contained.namespaces else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,
            env=sandbox.ROOT_ENV if contained.namespaces else env,
            process_group=0,
            close_fds=True,
            **user,
        )
        feeder = None
        if proc.stdin is not None:
            feeder = asyncio.create_task(_feed(proc.stdin, sandbox.environment(env)))
        out = _Stream(settings.max_output_bytes, bytearray())
        err = _Stream(settings.max_output_bytes, bytearray())
        assert proc.stdout is not None and proc.stderr is not None
        readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
        reporter = None
        if report is not None:
            reporter = asyncio.create_task(_report_live(out, err, variables, report))
        try:
            code = await _exit_status(proc, deadline + settings.kill_grace + 1.0)
        except BaseException:  # cancelled: a cancel, a shutdown, the job's timeout
            _kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.kill_grace):
                    await _exit_status(proc, math.inf)
            if contained.namespaces and sandbox.end(proc.pid):
                # unshare returns once its namespace is empty: nothing of the run is left
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(settings.kill_grace + 1.0):
                        await _exit_status(proc, math.inf)
            _kill_group(proc.pid, signal.SIGKILL)
            readers.cancel()
            _close_pipes(proc)
            raise
        finally:
            # what the script left running in its group (a background job) ends with it
            _kill_group(proc.pid, signal.SIGKILL)
            if reporter is not None:
                reporter.cancel()
            if feeder is not None:
                feeder.cancel()
        try:
            async with asyncio.timeout(settings.kill_grace + 1.0):
                await readers
        except TimeoutError:  # a process that left the group (setsid) holds the pipes open
            readers.cancel()
        _close_pipes(proc)
        duration = time.monotonic() - started
    finally:
        # shielded: a second cancel (a shutdown's) must not leave the directory or cgroup
        await asyncio.shield(asyncio.to_thread(_clean_up, workdir, cgroup))
    metrics.script_output(language, out.size, err.size)
    result: dict[str, Any] = {
        "exit_code": code,
        "duration": round(duration, 6),
        "stdout": variables.mask(out.text(), cut=out.size > len(out.kept)),
        "stderr": variables.mask(err.text(), cut=err.size > len(err.kept)),
        "stdout_bytes": out.size,
        "stderr_bytes": err.size,
        "stdout_truncated": out.size > len(out.kept),
        "stderr_truncated": err.size > len(err.kept),
    }
    if code == 0:
        return result
    tails = f"stdout (the end): {out.end(variables)}; stderr (the end): {err.end(variables)}"
    if code in (TIMED_OUT, 128 + signal.SIGKILL) and time.monotonic() >= deadline:
        raise RunFailed(
            f"the {language} script ran longer than exec_timeout ({exec_timeout}s) and was "
            f"killed; {tails}"
        )
    raise RunFailed(f"the {language} script exited with status {code}; {tails}")
