"""A release as a user gets it, built the way one is cut: from a clean ``git clone`` of the
committed tree (what is not committed is not released), tagged, ``python -m build`` makes
the sdist and then the wheel from that sdist. Both carry the migrations, the SQL, the
dashboard's build and the docs pages; the version is the tag's. The wheel, installed with
its dependencies into a fresh virtualenv, is a working tickwork: its own ``tickwork`` prints
the version, ``tickwork serve`` answers ``/readyz`` and serves the dashboard, and ``tickwork
demo`` runs the job path to the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .support import serving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]  # a hang guard: builds, installs
pytest.importorskip("build", reason="pip install -e '.[dev]' (build)")

ROOT = Path(__file__).resolve().parents[2]
TAG, VERSION = "v1.2.3", "1.2.3"
"""A tag made in the clone only: the release's version comes from it (setuptools-scm)."""
GUARD = 600.0
"""Not a timing assertion: only stops a broken build or install from hanging the run."""


def run(argv: list[str | Path], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a command that must succeed; its output."""
    done = subprocess.run(
        [str(a) for a in argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return str(done.stdout)


def package_data(clone: Path) -> list[str]:
    """What the package carries besides its modules, relative to ``src/tickwork``: every
    migration, SQL file, file of the dashboard's build and shipped monitoring file git tracks,
    and the docs pages (``src/tickwork/docs`` is a link to ``docs/``, which the MCP endpoint
    serves)."""
    tracked = run(
        [
            "git",
            "-C",
            clone,
            "ls-files",
            "src/tickwork/db/migrations",
            "src/tickwork/db/sql",
            "src/tickwork/web/dist",
            "src/tickwork/ops/monitoring",
        ]
    ).split()
    docs = clone / "docs"  # the guides and one level of folders (tutorials/, reference/)
    pages = sorted(
        f"docs/{p.relative_to(docs).as_posix()}" for g in ("*.md", "*/*.md") for p in docs.glob(g)
    )
    return ["py.typed", *(t.removeprefix("src/tickwork/") for t in tracked), *pages]


@dataclass(frozen=True)
class Release:
    """What one build made."""

    clone: Path
    """The clean clone of this checkout's HEAD it was built from, tagged."""
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The sdist and the wheel built from a tagged clean clone of this checkout's HEAD."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: a release is built from one")
    where = tmp_path_factory.mktemp("release")
    clone, dist = where / "clone", where / "dist"
    run(["git", "clone", "--quiet", ROOT, clone])
    run(["git", "-C", clone, "tag", "--force", TAG])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPTOOLS_SCM")}
    run([sys.executable, "-m", "build", "--outdir", dist, clone], env=env)
    # the wheel is built from the sdist: a file the sdist lacks is missing from the wheel
    assert sorted(p.name for p in dist.iterdir()) == [
        f"tickwork-{VERSION}-py3-none-any.whl",
        f"tickwork-{VERSION}.tar.gz",
    ]
    return Release(
        clone, dist / f"tickwork-{VERSION}.tar.gz", dist / f"tickwork-{VERSION}-py3-none-any.whl"
    )


def test_the_sdist_and_the_wheel_carry_the_package_data(release: Release) -> None:
    expected = package_data(release.clone)
    assert any(e.startswith("db/migrations/0001_") for e in expected), expected
    assert {"db/sql/jobs.sql", "web/dist/index.html", "docs/mcp.md"} <= set(expected)
    assert {"docs/tutorials/first-task.md", "docs/reference/cli.md"} <= set(expected)
    assert {"ops/monitoring/alerts.yml", "ops/monitoring/grafana-dashboard.json"} <= set(expected)
    assert any(e.endswith(".js") for e in expected) and any(e.endswith(".css") for e in expected)

    with tarfile.open(release.sdist) as archive:
        in_sdist = set(archive.getnames())
    top = f"tickwork-{VERSION}"
    assert [e for e in expected if f"{top}/src/tickwork/{e}" not in in_sdist] == []
    assert f"{top}/PKG-INFO" in in_sdist  # the version, for a build without git
    assert not any("node_modules" in n or "/.venv/" in n for n in in_sdist)

    with zipfile.ZipFile(release.wheel) as archive:
        in_wheel = set(archive.namelist())
        metadata = archive.read(f"tickwork-{VERSION}.dist-info/METADATA").decode()
    assert [e for e in expected if f"tickwork/{e}" not in in_wheel] == []
    assert f"\nVersion: {VERSION}\n" in metadata
    assert not any(n.startswith(("ui/", "tests/", "docs/")) for n in in_wheel)


def test_the_package_metadata_rates_9_of_10_and_the_readme_renders_on_the_index(
    release: Release,
) -> None:
    rated = subprocess.run(
        [sys.executable, "-m", "pyroma", "--min", "9", release.clone],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rated.returncode == 0, rated.stdout + rated.stderr
    with zipfile.ZipFile(release.wheel) as archive:
        metadata = archive.read(f"tickwork-{VERSION}.dist-info/METADATA").decode()
    for field in ("Keywords:", "Classifier: Typing :: Typed", "Project-URL: Source,"):
        assert field in metadata, field
    # the package index shows the README away from the repository: no relative link, and
    # each link into the repository names a file this checkout has
    readme = (release.clone / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert [link for link in links if not link.startswith(("https://", "#"))] == []
    ours = re.compile(
        r"https://(?:github\.com/tickwork/tickwork/(?:blob|tree)/main|"
        r"raw\.githubusercontent\.com/tickwork/tickwork/main)/([^#]+)"
    )
    inside = [m.group(1) for link in links if (m := ours.match(link))]
    assert inside and [p for p in inside if not (release.clone / p).exists()] == []


def test_the_wheel_in_a_fresh_virtualenv_serves_and_runs_the_demo(
    release: Release, tmp_path: Path, db_env: dict[str, str]
) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    python, tickwork = venv / "bin" / "python", venv / "bin" / "tickwork"
    run([python, "-m", "pip", "install", "--quiet", release.wheel])  # with its dependencies
    run([python, "-m", "pip", "check"])

    env = {k: v for k, v in db_env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    assert run([tickwork, "--version"], env=env, cwd=tmp_path) == f"tickwork {VERSION}\n"
    installed = run(
        [python, "-c", "import tickwork; print(tickwork.__version__, tickwork.__file__)"],
        env=env,
        cwd=tmp_path,
    ).split()
    assert installed[0] == VERSION
    assert Path(installed[1]).is_relative_to(venv), installed  # not this checkout's

    with serving(env, tmp_path, program=[str(tickwork)]) as (_, url, _):
        ready = httpx.get(f"{url}/readyz", timeout=GUARD)
        assert ready.status_code == 200, ready.text
        openapi = httpx.get(f"{url}/api/openapi.json", timeout=GUARD)
        assert json.loads(openapi.text)["info"]["version"] == VERSION
        page = httpx.get(f"{url}/", timeout=GUARD)
        assert page.status_code == 200 and '<div id="root">' in page.text

    demo = subprocess.run(
        [tickwork, "demo"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "SUCCEEDED" in demo.stdout and "DEAD_LETTER" in demo.stdout
