"""The storage seam: one typed method per named statement, for every family of tables.

``Store`` joins the families (a class per ``sql/<family>.sql``, with the executor's path
(claims, outcomes, renewals, reclaims, worker registration) in ``attempts.py`` and the
operators' reads of queues and workers in ``queues.py``); each method names its
statement once, takes typed parameters and a connection (pooled, the process's own, or the
caller's, in its transaction), and is timed by statement name (:data:`runner.TIMES`). Code
outside ``db/`` runs statements only through these methods.
"""

from __future__ import annotations

from tickwork.db.store.appconfig import AppConfigStatements
from tickwork.db.store.attempts import AttemptStatements
from tickwork.db.store.audit import AuditStatements
from tickwork.db.store.auth import AuthStatements
from tickwork.db.store.definitions import DefinitionStatements
from tickwork.db.store.health import HealthStatements
from tickwork.db.store.jobs import JobStatements
from tickwork.db.store.leases import LeaseStatements
from tickwork.db.store.migrations import MigrationStatements
from tickwork.db.store.queues import QueueStatements
from tickwork.db.store.runner import AsyncConn, Conn, Row
from tickwork.db.store.schedules import ScheduleStatements
from tickwork.db.store.signals import SignalStatements
from tickwork.db.store.tallies import TallyStatements
from tickwork.db.store.workers import WorkerMetricStatements

__all__ = ["AsyncConn", "Conn", "Row", "Store"]


class Store(
    AppConfigStatements,
    AttemptStatements,
    AuditStatements,
    AuthStatements,
    DefinitionStatements,
    HealthStatements,
    JobStatements,
    LeaseStatements,
    MigrationStatements,
    QueueStatements,
    ScheduleStatements,
    SignalStatements,
    TallyStatements,
    WorkerMetricStatements,
):
    """Every statement of one schema, as a typed method."""
