"""Statements of ``sql/migrations.sql`` that run outside the migrator."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Row, Runner


class MigrationStatements(Runner):
    """What the migrator recorded."""

    async def migration_applied(self, conn: AsyncConn) -> list[Row]:
        """Rows ``version, name, applied_at`` of the migrations applied, oldest first."""
        return await self._rows(conn, "migration_applied", {})
