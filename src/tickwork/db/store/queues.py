"""Statements of ``sql/queues.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class QueueStatements(Runner):
    """One method per statement of ``sql/queues.sql``."""
