"""The Dockerfile and compose.yaml, checked without a container engine (none runs here):
every ``tickwork`` command line in them parses as the CLI parses it, every ``TICKWORK_*``
variable names a setting and the settings load, no password is written in them, the
services start in order behind healthchecks, and the Dockerfile's build stage, given only
the files it copies, builds a wheel that carries what the package ships."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.core
import typer.main

from tickwork.cli import cli
from tickwork.config import RUNTIME_NAMES, load_settings

from .test_docs import setting_exists

pytestmark = pytest.mark.e2e
yaml = pytest.importorskip("yaml", reason="pip install -e '.[dev]' (pyyaml)")

ROOT = Path(__file__).resolve().parents[2]
INTERPOLATION = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")
"""Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}``."""


# -- reading the files ---------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    """One instruction of a Dockerfile, its continuation lines joined."""

    keyword: str
    argument: str


def dockerfile_stages() -> list[list[Instruction]]:
    """The Dockerfile's stages, each from its FROM."""
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    stages: list[list[Instruction]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, argument = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        assert stages, f"an instruction before the first FROM: {line}"
        stages[-1].append(Instruction(keyword.upper(), argument.strip()))
    return stages


def instructions(stage: list[Instruction], keyword: str) -> list[str]:
    return [i.argument for i in stage if i.keyword == keyword]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    return loaded


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's ``environment:``, a mapping or a list of ``NAME=value``."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def interpolated(value: str) -> str:
    """``value`` as compose makes it from an environment that sets every required variable
    (to a placeholder of 20 characters or more) and none of the optional ones."""

    def one(match: re.Match[str]) -> str:
        if match[2] and match[2].endswith("-"):
            return match[3]
        return f"placeholder-for-{match[1].lower()}"

    return INTERPOLATION.sub(one, value)


def tickwork_services() -> dict[str, dict[str, Any]]:
    """The services that run the image the Dockerfile builds."""
    return {
        name: service
        for name, service in compose()["services"].items()
        if "build" in service or str(service.get("image", "")).startswith("tickwork")
    }


class Refused(Exception):
    """The CLI refuses a command line (its message says why)."""


def parse_command(argv: list[str]) -> Any:
    """Parse a ``tickwork`` command line as the CLI does, without running it: its context
    (``.info_name``, ``.params``), or ``Refused`` for an unknown command or option or an
    extra argument."""
    assert argv[0] == "tickwork", argv
    command: Any = typer.main.get_command(cli)
    parent: Any = None
    name, words = "tickwork", argv[1:]
    while isinstance(command, typer.core.TyperGroup):
        parent = typer.Context(command, info_name=name, parent=parent)
        if not words:
            raise Refused(f"{argv}: no command of {name}")
        name, words = words[0], words[1:]
        command = command.get_command(parent, name)
        if command is None:
            raise Refused(f"{argv}: no such command {name!r}")
    try:
        return command.make_context(name, list(words), parent=parent)
    except Exception as exc:  # the CLI's usage error (click's, or typer's own copy of it)
        raise Refused(f"{argv}: {exc}") from exc


def command_lines() -> dict[str, list[str]]:
    """Every tickwork command line: the image's CMD and each service's command."""
    [*_, final] = dockerfile_stages()
    [cmd] = instructions(final, "CMD")
    lines = {"Dockerfile CMD": json.loads(cmd)}  # the exec form, or json fails here
    for name, service in tickwork_services().items():
        command = service.get("command")
        if command is not None:
            assert isinstance(command, list), f"{name}: the exec form (a list), so PID 1 is ours"
            lines[f"compose {name}"] = [str(word) for word in command]
    return lines


# -- the tests -----------------------------------------------------------------------------


def test_the_parser_refuses_what_the_cli_refuses() -> None:
    assert parse_command(["tickwork", "worker", "--runtime", "http"]).params["runtime"] == "http"
    assert parse_command(["tickwork", "users", "list"]).info_name == "list"
    for wrong, why in (
        (["tickwork", "servez"], "no such command"),
        (["tickwork", "worker", "--bogus"], "No such option"),
        (["tickwork", "migrate", "extra"], "unexpected extra argument"),
        (["tickwork", "users", "nobody"], "no such command"),
        (["tickwork", "worker", "--concurrency", "many"], "valid integer"),
    ):
        with pytest.raises(Refused, match=why):
            parse_command(wrong)


def test_every_tickwork_command_line_parses() -> None:
    lines = command_lines()
    assert lines["Dockerfile CMD"] == ["tickwork", "serve"]
    commands = {parse_command(argv).info_name for argv in lines.values()}
    assert {"serve", "worker", "migrate"} <= commands, lines
    for argv in lines.values():
        runtime = parse_command(argv).params.get("runtime")
        assert runtime is None or runtime in RUNTIME_NAMES, argv


def test_postgres_16_one_serve_and_n_workers() -> None:
    services = compose()["services"]
    assert str(services["postgres"]["image"]).startswith("postgres:16")
    assert services["serve"].get("deploy", {}).get("replicas", 1) == 1
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert parse_command(services["worker"]["command"]).info_name == "worker"
    for service in tickwork_services().values():
        assert service["build"]["context"] == "."  # the Dockerfile beside compose.yaml


def test_every_tickwork_variable_names_a_setting_and_the_settings_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [*_, final] = dockerfile_stages()
    image_env: dict[str, str] = {}
    for argument in instructions(final, "ENV"):
        for pair in re.findall(r"(\w+)=(\S+)", argument):
            image_env[pair[0]] = pair[1]
    assert image_env["TICKWORK_API__HOST"] == "0.0.0.0"  # reachable from other containers
    for name, service in tickwork_services().items():
        env = image_env | environment(service)
        assert "TICKWORK_DATABASE_URL" in env, name
        for variable in [k for k in env if k.startswith("TICKWORK_")]:
            assert setting_exists(variable), f"{name}: {variable} is no tickwork setting"
        with monkeypatch.context() as patched:
            for variable in [k for k in os.environ if k.startswith("TICKWORK_")]:
                patched.delenv(variable)
            patched.chdir(ROOT / "tests")  # no tickwork.toml there
            for variable, value in env.items():
                patched.setenv(variable, interpolated(value))
            settings = load_settings()  # a ConfigError names what is wrong
        assert settings.api.host == "0.0.0.0"
        assert settings.database_url is not None
        assert "@postgres:5432/" in settings.database_url.get_secret_value()


def test_no_password_is_written_in_the_files() -> None:
    required = re.compile(r"^\$\{\w+:\?[^}]*\}$")
    for name, service in compose()["services"].items():
        for variable, value in environment(service).items():
            if "PASSWORD" in variable:
                assert required.match(value), f"{name}: {variable} is written, not required"
            if variable == "TICKWORK_DATABASE_URL":
                password = value.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
                assert required.match(password), f"{name}: the database password is written"
    assert "TICKWORK_ADMIN_PASSWORD" in environment(compose()["services"]["serve"])
    assert "PASSWORD" not in (ROOT / "Dockerfile").read_text(encoding="utf-8")


def test_the_services_start_in_order_behind_healthchecks() -> None:
    services = compose()["services"]
    check = services["postgres"]["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "pg_isready"
    for name, service in tickwork_services().items():
        depends = service["depends_on"]
        assert depends["postgres"] == {"condition": "service_healthy"}, name
        if name != "migrate":
            assert depends["migrate"] == {"condition": "service_completed_successfully"}, name


def test_only_serve_keeps_the_images_readyz_healthcheck() -> None:
    [*_, final] = dockerfile_stages()
    [healthcheck] = instructions(final, "HEALTHCHECK")
    assert "/readyz" in healthcheck and "CMD [" in healthcheck
    for name, service in tickwork_services().items():
        command = service.get("command") or ["tickwork", "serve"]
        serves = parse_command(command).info_name == "serve"
        disabled = service.get("healthcheck", {}).get("disable", False)
        assert disabled != serves, f"{name}: a healthcheck on /readyz only where serve listens"


def test_the_grace_to_stop_covers_the_workers_shutdown_grace() -> None:
    grace = load_settings().worker.shutdown_grace
    for name, service in tickwork_services().items():
        given = re.fullmatch(r"(\d+)s", str(service["stop_grace_period"]))
        assert given and int(given[1]) > grace, f"{name}: {service['stop_grace_period']}"


def test_the_image_is_built_in_stages_and_runs_as_no_root() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    [base] = instructions(stages[-1], "FROM")
    assert base == "python:3.11-slim"
    [user] = instructions(stages[-1], "USER")
    assert user.split(":")[0] not in ("root", "0")
    [built_in] = instructions(stages[0], "FROM")
    stage = built_in.split()[-1]  # FROM image AS stage
    installs = " ".join(instructions(stages[-1], "RUN"))
    assert f"from={stage}," in installs and "pip install" in installs  # its wheels


def test_the_build_stage_builds_the_wheel_from_the_files_it_copies(tmp_path: Path) -> None:
    """The build stage copies files from the context into its WORKDIR, then builds: given
    only those (and none that .dockerignore leaves out), the wheel has the package data."""
    [build, *_] = dockerfile_stages()
    [workdir] = instructions(build, "WORKDIR")
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    context = tmp_path / workdir.lstrip("/")
    context.mkdir(parents=True)
    for argument in instructions(build, "COPY"):
        *sources, destination = [w for w in argument.split() if not w.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the context"
            assert not any(fnmatch.fnmatch(source, p.removeprefix("**/")) for p in ignored)
            target = (
                context / destination / (Path(source).name if destination.endswith("/") else "")
            )
            if (ROOT / source).is_dir():
                shutil.copytree(
                    ROOT / source,
                    target,
                    symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / source, target)
    [run] = [r for r in instructions(build, "RUN") if "pip wheel" in r]
    assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_TICKWORK" in run  # the version argument
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=context,
        env={**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_TICKWORK": "1.2.3"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("tickwork-*.whl")
    assert wheel.name == "tickwork-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for shipped in ("docs/mcp.md", "web/dist/index.html", "db/sql/jobs.sql"):
        assert f"tickwork/{shipped}" in names, shipped
    assert any(n.startswith("tickwork/db/migrations/0001_") for n in names)
