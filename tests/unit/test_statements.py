from __future__ import annotations

import pytest

from tickwork.db.migrate import available
from tickwork.db.statements import Statements, parse


def test_parse_splits_named_blocks_keeping_comments() -> None:
    text = "-- name: a\n-- why a\nSELECT 1;\n\n-- name: b\nSELECT 2;\n"
    assert parse(text) == {"a": "-- why a\nSELECT 1", "b": "SELECT 2"}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="'a' is defined twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_schema_is_substituted_everywhere() -> None:
    statements = Statements("custom_schema")
    claim = statements["job_claim"]
    assert "custom_schema.jobs" in claim and "{schema}" not in claim
    assert statements.channel("jobs") == "custom_schema.jobs"
    with pytest.raises(KeyError, match="no SQL statement named 'nope'"):
        statements["nope"]


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in available()]
    assert versions == list(range(1, len(versions) + 1))
