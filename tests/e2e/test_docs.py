"""The documentation, run: every Python and shell block of README.md and docs/ (with its
folders: docs/tutorials/*.md).

A reader copies these blocks, so each runs as written, as a test of its own named
``page:line`` (the line of its opening fence), in a directory of its own, against the test
database: ``TICKWORK_DATABASE_URL`` and a fresh, migrated ``TICKWORK_SCHEMA`` per page, the
API on port 0, this interpreter's ``bin/`` first on ``PATH``.

- ```python: run as a script. A block whose first line is ``# NAME.py`` is a file the page
  has the reader create: it is written as NAME.py for every later block of the page (and
  for the docs pages, which build on the README's files) and checked by importing it;
  ``# NAME.py (continued)`` appends to it.
- ```sh: each command (a line; a trailing backslash continues it) runs in bash and must exit
  0. ``tickwork serve`` and ``tickwork worker`` run until they say they are ready, are sent
  SIGTERM and must exit 0. ``tickwork doctor`` may exit 1 once it has printed its report: it
  exits 1 on warnings, and a shared test server may well deserve one.
- ```ini with ``ExecStart=`` (and ``ExecStartPre=``/``ExecStartPost=``) lines, a systemd
  unit: those commands run as above, without a shell (as systemd runs them), with ``%i`` as
  ``1``, the program found on ``PATH`` by its name and the unit's ``Environment=`` applied.
- a block named ``# NAME.toml`` or ``# NAME.env``: configuration, which must load
  (``load_settings``), every ``TICKWORK_*`` variable naming a setting; a relative
  ``NAME.toml`` is also written for later blocks.

Other blocks (SQL, diagrams, container files) are not run. A block that cannot run here is
preceded by ``<!-- not run: REASON -->``; ``NOT_RUN`` counts them per page, so a new block
runs unless someone decides otherwise, in view.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psycopg
import pytest
from pydantic import BaseModel

from tickwork import App
from tickwork.config import Settings, load_settings

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/**/*.md"))]
"""Every page of the site: docs/ and its folders (tutorials/, and reference/, whose generated
tables hold no blocks)."""

NOT_RUN = {
    "README.md": 3,
    "docs/api.md": 2,
    "docs/benchmarks.md": 4,
    "docs/dashboard.md": 1,
    "docs/fastapi.md": 1,
    "docs/mcp.md": 1,
    "docs/index.md": 2,
    "docs/definitions.md": 2,
    "docs/deployment.md": 2,
    "docs/django.md": 7,
    "docs/reliability.md": 2,
    "docs/scaling.md": 2,
    "docs/schedules.md": 2,
    "docs/signals.md": 2,
    "docs/testing.md": 1,
    "docs/tracing.md": 1,
    "docs/tutorials/cron-job.md": 1,
}
"""Blocks marked ``<!-- not run: ... -->``, per page: a new marker is a decision made here."""

HANG_GUARD = 120.0
"""Not a timing assertion: only stops a broken block from hanging the run."""
READY = {"serve": "roles: ", "worker": "worker started"}
"""Long-running commands and the line each prints once it is ready."""
REPORT_PRINTED = {"doctor": "xmin horizon"}
"""Commands that exit 1 on warnings, and the line that shows their report was printed."""

FENCE = re.compile(r"^(\s*)```(\S*)")
MARKER = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
NAMED = re.compile(r"^#\s+(\S+\.(?:py|toml|env))(\s+\(continued\))?(?:\s|$)")
EXEC = re.compile(r"^(ExecStartPre|ExecStart|ExecStartPost)=[-@+!:]*(.+)$", re.M)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SHELLS = {"sh", "bash", "shell"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    """Line of the opening fence (1-based)."""
    language: str
    code: str
    not_run: str | None
    """The reason given by a ``<!-- not run: ... -->`` marker before it."""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def name(self) -> str | None:
        """The file this block is, from a first line ``# NAME.py|.toml|.env``."""
        match = NAMED.match(self.code)
        return match.group(1) if match else None

    @property
    def continued(self) -> bool:
        match = NAMED.match(self.code)
        return bool(match and match.group(2))

    @property
    def kind(self) -> str | None:
        """How it runs: python, sh, unit, config; None when it is not run at all."""
        if self.name and self.name.endswith((".toml", ".env")):
            return "config"
        if self.language == "python":
            return "python"
        if self.language in SHELLS:
            return "sh"
        if self.language == "ini" and EXEC.search(self.code):
            return "unit"
        return None


def parse(page: str) -> tuple[list[Block], list[str]]:
    """The page's blocks, and what is wrong with its markers."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    markers = {i for i, line in enumerate(lines) if "<!--" in line and "not run" in line}
    used: set[int] = set()
    problems: list[str] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        indent, language, start = fence.group(1), fence.group(2), index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith("```"):
            body.append(lines[index].removeprefix(indent))
            index += 1
        index += 1  # the closing fence
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.match(lines[before].strip()) if before in markers else None
        block = Block(
            page, start + 1, language, "\n".join(body) + "\n", marker[1] if marker else None
        )
        if marker:
            used.add(before)
            if block.kind is None:
                problems.append(f"{block.id}: marked not run, but its kind of block never runs")
        blocks.append(block)
    for i in sorted(markers - used):
        problems.append(f"{page}:{i + 1}: `<!-- not run: REASON -->` right before a block")
    return blocks, problems


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in parse(page)[0]]


RUN = [b for b in all_blocks() if b.kind is not None]


# -- the environment of a page -----------------------------------------------------------


@pytest.fixture(scope="session")
def page_schema(database_url: str) -> Iterator[Callable[[str], str]]:
    """A fresh, migrated schema per page (its blocks build on each other), dropped at the end."""
    made: dict[str, str] = {}

    def schema_of(page: str) -> str:
        if page not in made:
            name = f"tw_docs_{os.getpid()}_{secrets.token_hex(3)}"
            App(database_url=database_url, schema=name).migrate()
            made[page] = name
        return made[page]

    yield schema_of
    with psycopg.connect(database_url, autocommit=True) as conn:
        for name in made.values():
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def block_env(database_url: str, schema: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "PG"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["TICKWORK_DATABASE_URL"] = database_url
    env["TICKWORK_SCHEMA"] = schema
    env["TICKWORK_API__PORT"] = "0"
    return env


def write_files(block: Block, directory: Path) -> None:
    """The files the reader has made by the time they reach ``block``: the README's first,
    for a docs page, then the page's own up to this block (itself included)."""
    earlier = [b for b in parse("README.md")[0] if block.page != "README.md"]
    earlier += [b for b in parse(block.page)[0] if b.line <= block.line]
    for b in earlier:
        name = b.name
        if name is None or Path(name).is_absolute() or name.endswith(".env"):
            continue
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if b.continued:
            assert path.exists(), f"{b.id} continues {name}, which no earlier block starts"
            path.write_text(path.read_text(encoding="utf-8") + "\n\n" + b.code, encoding="utf-8")
        else:
            path.write_text(b.code, encoding="utf-8")


# -- running -------------------------------------------------------------------------------


def shell_commands(code: str) -> list[str]:
    """A shell block's commands: one a line, a trailing backslash continuing it."""
    commands: list[str] = []
    current = ""
    for line in code.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        commands.append(current + line)
        current = ""
    if current:
        commands.append(current)
    return commands


def split_command(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``NAME=value`` words (the command's environment), then the command."""
    env: dict[str, str] = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def tickwork_subcommand(argv: list[str]) -> str | None:
    if argv and Path(argv[0]).name == "tickwork":
        rest = argv[1:]
    elif argv[1:3] == ["-m", "tickwork"]:
        rest = argv[3:]
    else:
        return None
    return next((word for word in rest if not word.startswith("-")), None)


def check_exit(what: str, command: str, code: int, out: str) -> None:
    warned = code == 1 and what in REPORT_PRINTED and REPORT_PRINTED[what] in out
    assert code == 0 or warned, f"`{command}` exited {code}:\n{out}"


def run_shell(command: str, cwd: Path, env: dict[str, str]) -> None:
    """One command of a shell block: serve and worker until ready, anything else in bash."""
    try:
        assigned, argv = split_command(shlex.split(command, comments=True))
    except ValueError:  # shell syntax shlex does not read: bash does
        assigned, argv = {}, []
    what = tickwork_subcommand(argv) or ""
    if what in READY:
        assert not {"|", "&", "&&", ";", "||"} & set(argv), f"run `{command}` on its own line"
        run_argv(argv, cwd, env | assigned, command)
        return
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    check_exit(what, command, done.returncode, done.stdout + done.stderr)


def run_argv(argv: list[str], cwd: Path, env: dict[str, str], command: str) -> None:
    """Run a command without a shell; a long-running one until ready, then SIGTERM."""
    program = shutil.which(Path(argv[0]).name, path=env["PATH"])
    assert program is not None, f"`{argv[0]}` is not on PATH"
    what = tickwork_subcommand(argv) or ""
    if what not in READY:
        done = subprocess.run(
            [program, *argv[1:]],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
        check_exit(what, command, done.returncode, done.stdout)
        return
    proc = subprocess.Popen(
        [program, *argv[1:]],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines))
    reader.start()
    seen: list[str] = []
    try:
        while True:
            try:
                line = lines.get(timeout=HANG_GUARD)
            except queue.Empty:
                raise AssertionError(
                    f"`{command}` never said it was ready:\n" + "".join(seen)
                ) from None
            if line is None:
                code = proc.wait(HANG_GUARD)
                raise AssertionError(
                    f"`{command}` exited {code} before it was ready:\n" + "".join(seen)
                )
            seen.append(line)
            if READY[what] in line:
                break
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(HANG_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_GUARD)
        reader.join(HANG_GUARD)
    while (rest := lines.get_nowait()) is not None:
        seen.append(rest)
    assert code == 0, f"`{command}` exited {code} after SIGTERM:\n" + "".join(seen)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Hand a process's output on line by line; None once it ends."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_python(block: Block, cwd: Path, env: dict[str, str]) -> None:
    if block.name:  # a module the reader created: it must import
        module = block.name.removesuffix(".py").replace("/", ".")
        argv = [sys.executable, "-c", f"import {module}"]
    else:
        script = cwd / "_doc_block.py"
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, script.name]
    # a block that hangs is aborted with SIGABRT, on which faulthandler prints where every
    # thread of it stood
    with subprocess.Popen(
        [argv[0], "-X", "faulthandler", *argv[1:]],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            _, stderr = process.communicate(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            _, stderr = process.communicate()
            pytest.fail(f"{block.id} did not end within {HANG_GUARD}s:\n{stderr}")
    assert process.returncode == 0, f"{block.id} exited {process.returncode}:\n{stderr}"


def run_unit(block: Block, cwd: Path, env: dict[str, str]) -> None:
    """A systemd unit's commands, as systemd runs them (no shell), with its Environment=."""
    specifiers = {"%i": "1", "%I": "1", "%%": "%"}
    unit_env: dict[str, str] = {}
    for line in block.code.splitlines():
        if line.startswith("Environment="):
            unit_env |= split_command(shlex.split(line.removeprefix("Environment=")))[0]
    ours = {k: env[k] for k in ("TICKWORK_DATABASE_URL", "TICKWORK_SCHEMA")}
    for match in EXEC.finditer(block.code):
        command = re.sub(r"%[iI%]", lambda m: specifiers[m[0]], match[2])
        run_argv(shlex.split(command), cwd, env | unit_env | ours, command)


def setting_exists(variable: str) -> bool:
    """Whether ``TICKWORK_A__B`` names a setting (the environment source ignores the rest)."""
    model: type[BaseModel] = Settings
    parts = variable.removeprefix("TICKWORK_").lower().split("__")
    for depth, part in enumerate(parts):
        found = model.model_fields.get("schema_name" if part == "schema" else part)
        if found is None:
            return False
        annotation = found.annotation
        if depth < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def check_config(block: Block, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(cwd)
    assert block.name is not None
    if block.name.endswith(".toml"):
        path = cwd / "doc-config.toml"
        path.write_text(block.code, encoding="utf-8")
        monkeypatch.setenv("TICKWORK_CONFIG", str(path))
    else:
        for line in block.code.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, _, value = line.partition("=")
            if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]  # as systemd and compose read an env file
            assert setting_exists(name), f"{block.id}: {name} is no tickwork setting"
            monkeypatch.setenv(name, value)
    load_settings()  # raises ConfigError naming what is wrong


# -- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_block_runs_as_written(
    block: Block,
    database_url: str,
    page_schema: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if block.not_run:
        pytest.skip(f"{block.id} not run: {block.not_run}")
    write_files(block, tmp_path)
    if block.kind == "config":
        check_config(block, tmp_path, monkeypatch)
        return
    env = block_env(database_url, page_schema(block.page))
    if block.kind == "python":
        run_python(block, tmp_path, env)
    elif block.kind == "unit":
        run_unit(block, tmp_path, env)
    else:
        for command in shell_commands(block.code):
            run_shell(command, tmp_path, env)


def test_blocks_not_run_are_the_counted_ones() -> None:
    counted: dict[str, int] = {}
    for block in all_blocks():
        if block.not_run:
            counted[block.page] = counted.get(block.page, 0) + 1
    assert counted == NOT_RUN


def test_markers_are_well_formed_and_mark_runnable_blocks() -> None:
    problems = [p for page in PAGES for p in parse(page)[1]]
    assert problems == []


def test_the_harness_finds_blocks_and_reads_commands() -> None:
    kinds = {b.kind for b in RUN}
    assert {"python", "sh", "unit", "config"} <= kinds
    assert shell_commands("# a comment\n\ntickwork a \\\n  --b c  # why\nls\n") == [
        "tickwork a    --b c  # why",
        "ls",
    ]
    assert tickwork_subcommand(["/opt/x/bin/tickwork", "worker", "--queues", "a"]) == "worker"
    assert tickwork_subcommand(["python", "-m", "tickwork", "serve"]) == "serve"
    assert split_command(["A=1", "tickwork", "B=2"]) == ({"A": "1"}, ["tickwork", "B=2"])
    assert setting_exists("TICKWORK_API__TRUSTED_PROXIES")
    assert setting_exists("TICKWORK_SCHEMA")
    assert not setting_exists("TICKWORK_API_PUBLIC_URL")  # one underscore: silently ignored
    assert not setting_exists("TICKWORK_DATABASE_URL__X")


UNSAFE_FOR_OLD_CODE = re.compile(
    r"\bDROP\s+(TABLE|COLUMN|SCHEMA|TYPE|FUNCTION)\b|\bRENAME\b"
    r"|\bALTER\s+COLUMN\b[^;,]*\b(TYPE|SET\s+NOT\s+NULL)\b",
    re.I,
)


def test_migrations_only_add_so_the_previous_version_runs_on_the_new_schema() -> None:
    """docs/deployment.md (Upgrades) tells operators that processes of the previous version
    keep working while and after ``tickwork migrate`` runs. That holds while every migration
    only adds (tables, indexes, nullable columns or columns with a default) or replaces an
    index: this fails when one does not, and the page must say so."""
    found = []
    for path in sorted((ROOT / "src/tickwork/db/migrations").glob("*.sql")):
        sql = re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))
        found += [f"{path.name}: {m[0]}" for m in UNSAFE_FOR_OLD_CODE.finditer(sql)]
        for clause in re.findall(r"\bADD\s+COLUMN\b([^;]*?)(?=,\s*ADD\b|;|$)", sql, re.I | re.S):
            if re.search(r"\bNOT\s+NULL\b", clause, re.I) and not re.search(
                r"\bDEFAULT\b", clause, re.I
            ):
                found.append(f"{path.name}: ADD COLUMN{clause} (NOT NULL without a default)")
    assert found == []
