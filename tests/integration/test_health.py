"""The operators' health report reads real statistics from the database."""

from __future__ import annotations

import secrets

import psycopg

from tickwork import App


def test_report_lists_tables_and_indexes(app: App) -> None:
    @app.task(name="tests.sized")
    def sized() -> None:
        pass

    sized.defer()
    report = app.health()
    names = {t.name for t in report.tables}
    assert {"jobs", "executions", "audit_events", "workers"} <= names
    assert any(i.name == "jobs_runnable_idx" for i in report.indexes)
    # a table with rows has a size; an emptied one without a TOAST table has none
    assert all(t.table_bytes >= 0 for t in report.tables)
    assert next(t for t in report.tables if t.name == "jobs").table_bytes > 0


def test_old_open_transaction_is_named_in_a_warning(app: App, database_url: str) -> None:
    # a name of its own: a test run beside this one may hold a "forgotten report" too
    name = f"forgotten-report-{secrets.token_hex(4)}"
    with psycopg.connect(database_url, application_name=name) as holder:
        holder.execute("SELECT txid_current()")  # holds a snapshot and an xid, uncommitted
        report = app.health(xmin_warning_seconds=1e-9)
        assert report.oldest_xmin is not None
        assert any(name in w and "held back vacuum" in w for w in report.warnings)
        holder.rollback()
        after = app.health(xmin_warning_seconds=1e-9)
    assert not any(name in w for w in after.warnings)


def test_a_schema_without_tables_is_reported_not_shown_as_healthy(database_url: str) -> None:
    name = f"tw_never_migrated_{secrets.token_hex(4)}"
    absent = App(database_url=database_url, schema=name)
    try:
        report = absent.health()
    finally:
        absent.db.close()
    assert report.tables == []
    assert any(f"{name!r} holds no tables" in w for w in report.warnings)
