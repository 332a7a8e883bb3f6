"""Statements of ``sql/signals.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class SignalStatements(Runner):
    """One method per statement of ``sql/signals.sql``."""
