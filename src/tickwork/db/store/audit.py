"""Statements of ``sql/audit.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Conn, Row, Runner


class AuditStatements(Runner):
    """One method per statement of ``sql/audit.sql``."""

    def audit_list_for_target_sync(
        self, conn: Conn, *, target_type: str, target_id: str
    ) -> list[Row]:
        """The audit events of one target, oldest first."""
        return self._rows_sync(
            conn, "audit_list_for_target", {"target_type": target_type, "target_id": target_id}
        )
