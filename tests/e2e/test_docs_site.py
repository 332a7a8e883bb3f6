"""The documentation site builds with mkdocs in strict mode: a broken link, a missing anchor
or a page left out of the navigation is an error, not a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs", reason="pip install -e '.[dev]' (mkdocs-material)")


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    for page in (
        "index.html",
        "mcp/index.html",
        "testing/index.html",
        "api/index.html",
        "tutorials/first-task/index.html",
        "reference/configuration/index.html",
        "reference/cli/index.html",
        "reference/rest/index.html",
    ):
        assert (tmp_path / page).exists(), page
    assert "Getting started" in (tmp_path / "index.html").read_text()
