"""Statements of the executor's path: claims, outcomes, progress, lease renewal, reclaims,
worker registration (from ``sql/jobs.sql``, ``sql/executions.sql``, ``sql/workers.sql``)."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class AttemptStatements(Runner):
    """One method per statement the executor, the watchdog and retention run."""
