"""CI runs the README's test command as written: its install steps, then its ``pytest`` with no
test database URL (the embedded server, as on a machine with no PostgreSQL server), and a
dashboard browser test that cannot run fails there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_command(page: str = "README.md", heading: str = "## Test it") -> list[str]:
    """The steps (``&&``-separated) of the README's "Test it" command."""
    text = (ROOT / page).read_text()
    section = text.split(heading, 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.DOTALL)
    assert block is not None, "the README's Test it section has no sh block"
    return [step.strip() for step in block.group(1).split("&&")]


def ci_lines() -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_command_on_the_embedded_server() -> None:
    steps = readme_command()
    assert steps[-1] == "pytest", steps  # the whole suite, nothing chosen
    assert 'pip install -e ".[dev]"' in steps and "npm ci --prefix ui" in steps, steps
    lines = ci_lines()
    run = lines.index(steps[-1])  # the first pytest of .ci/run is the README's, as written
    assert not any(line.split()[0] == "pytest" for line in lines[:run])
    before = lines[:run]
    assert 'python -m pip install --quiet -e ".[dev]"' in before
    assert any(line.startswith("if npm ci --prefix ui ") for line in before)
    # no server URL reaches it: the suite starts its embedded server
    assert "unset TICKWORK_TEST_DATABASE_URL" in before
    assert not [line for line in before if "TICKWORK_TEST_DATABASE_URL=" in line]
    assert "export TICKWORK_REQUIRE_BROWSER=1" in before


def test_the_docs_site_gives_the_readmes_test_command() -> None:
    assert readme_command("docs/index.md", "Test it:") == readme_command()
