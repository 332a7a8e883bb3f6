"""The generated reference pages (docs/reference/) are what the code renders now: a setting,
a command, an option or a route added without regenerating them fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from tickwork import reference
from tickwork.api.security import ROUTE_ROLES
from tickwork.config import ReactorSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "reference"


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return reference.render()


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_page_is_what_the_code_renders(name: str, rendered: dict[str, str]) -> None:
    committed = PAGES / name
    assert committed.exists(), f"docs/reference/{name} is missing: run `{reference.COMMAND}`"
    assert committed.read_text(encoding="utf-8") == rendered[name], (
        f"docs/reference/{name} is stale: run `{reference.COMMAND}` and commit the result"
    )


def test_the_pages_do_not_depend_on_the_environment(
    rendered: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TICKWORK_WORKER__CONCURRENCY", "7")
    monkeypatch.setenv("TICKWORK_API__MAX_BODY_BYTES", "4096")
    monkeypatch.setenv("TICKWORK_APP", "elsewhere:app")
    (tmp_path / "tickwork.toml").write_text('schema = "elsewhere"\n')
    monkeypatch.chdir(tmp_path)
    assert reference.render() == rendered


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for name, field in model.model_fields.items():
        found.append((prefix + name, field.description))
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _fields(annotation, f"{prefix}{name}.")
    return found


def test_every_setting_has_a_description_for_the_reference() -> None:
    fields = _fields(Settings) + _fields(ReactorSettings, "signals.reactors.NAME.")
    assert [name for name, description in fields if not description] == [], (
        "give each of these settings a docstring (it is its description in the reference)"
    )


def test_every_route_and_its_role_is_in_the_rest_reference(rendered: dict[str, str]) -> None:
    page = rendered["rest.md"]
    for (method, path), role in ROUTE_ROLES.items():
        named = "public" if role is None else role.name
        assert f"| `{method} {path}` | {named} |" in page, (method, path)
