"""Statements of ``sql/executions.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class ExecutionStatements(Runner):
    """One method per statement of ``sql/executions.sql``."""
