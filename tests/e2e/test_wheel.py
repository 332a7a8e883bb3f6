"""The wheel built from a copy of this checkout carries the dashboard (and the SQL), and a
``tickwork serve`` running from the wheel's files alone, with no Node.js on its PATH, serves
the dashboard's page and files. The copy has no git metadata, so no tag to take the version
from: the wheel has setuptools-scm's fallback version. (test_release.py builds a release
from a git clone.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

from .support import serving

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
START_GUARD = 120.0  # not a timing assertion: only stops a broken start from hanging the run


def test_the_wheel_serves_the_dashboard_without_node(
    tmp_path: Path, db_env: dict[str, str]
) -> None:
    if not (ROOT / "src" / "tickwork" / "web" / "dist" / "index.html").exists():
        pytest.fail("the dashboard's build is missing from src/tickwork/web/dist")
    source = tmp_path / "source"  # a copy: the build leaves its files beside the sources
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".ci-*", "node_modules", "build", "*.egg-info"
        ),
    )
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"]
    built = subprocess.run(
        [*command, "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("tickwork-*.whl")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    fallback = pyproject["tool"]["setuptools_scm"]["fallback_version"]
    assert wheel.name == f"tickwork-{fallback}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "installed")
    assert "tickwork/web/dist/index.html" in names
    assets = [n for n in names if n.startswith("tickwork/web/dist/assets/")]
    assert any(n.endswith(".js") for n in assets) and any(n.endswith(".css") for n in assets)
    assert any(n.startswith("tickwork/db/migrations/") for n in names)
    assert "tickwork/docs/mcp.md" in names  # the MCP endpoint's documentation resources
    assert not any("node_modules" in n or n.startswith("ui/") for n in names)

    env = db_env | {
        "PYTHONPATH": str(tmp_path / "installed"),  # the wheel's files, not the checkout's
        "PATH": os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "node").exists()
        ),
    }
    with serving(env, tmp_path, "--roles", "api") as (_, url, _):
        page = httpx.get(f"{url}/jobs", timeout=START_GUARD)
        assert page.status_code == 200 and '<div id="root">' in page.text
        for path in re.findall(r'(?:src|href)="(/assets/[^"]+)"', page.text):
            assert httpx.get(f"{url}{path}", timeout=START_GUARD).status_code == 200, path
        where = subprocess.run(
            [sys.executable, "-c", "import tickwork; print(tickwork.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert where.stdout.startswith(str(tmp_path / "installed"))
