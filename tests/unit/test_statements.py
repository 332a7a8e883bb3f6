from __future__ import annotations

import re

import pytest

from tickwork.db.migrate import available
from tickwork.db.statements import Statements, _raw, parse


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


def test_the_capped_claim_keeps_in_step_with_the_claim() -> None:
    # job_claim_capped is job_claim with a second, capped range for sync tasks: the same
    # ranges, locks and answer (a worker switches between the two from one claim to the next)
    statements = Statements("s")
    claim, capped = statements["job_claim"], statements["job_claim_capped"]
    tail = "), claimed AS ("
    assert claim[claim.index(tail) :] == capped[capped.index(tail) :]
    lateral = claim[claim.index("CROSS JOIN LATERAL (") : claim.index(") AS c")]
    assert lateral in capped
    queues = claim[claim.index("FROM (") : claim.index(") AS q")]
    assert queues in capped


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in available()]
    assert versions == list(range(1, len(versions) + 1))


def test_no_statement_has_a_percent_sign_psycopg_would_read_as_a_placeholder() -> None:
    # comments travel with the statement: a bare % anywhere fails it when it runs
    stray = {
        name: text for name, text in _raw().items() if "%" in re.sub(r"%\(\w+\)s|%%", "", text)
    }
    assert sorted(stray) == []
