"""Statements of ``sql/workers.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class WorkerStatements(Runner):
    """One method per statement of ``sql/workers.sql``."""
