"""Statements of ``sql/health.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


class HealthStatements(Runner):
    """One method per statement of ``sql/health.sql``."""

    async def health_autovacuum(self, conn: AsyncConn) -> bool:
        """Whether the server runs autovacuum."""
        return bool((await self._rows(conn, "health_autovacuum", {}))[0]["autovacuum"])

    async def health_tables(self, conn: AsyncConn) -> list[Row]:
        """Size, dead tuples and HOT updates of each table of the schema, by name."""
        return await self._rows(conn, "health_tables", {"schema": self.schema})

    async def health_indexes(self, conn: AsyncConn) -> list[Row]:
        """Size and scans of each index of the schema, by table and name."""
        return await self._rows(conn, "health_indexes", {"schema": self.schema})

    async def health_xmin_horizon(self, conn: AsyncConn, *, limit: int) -> list[Row]:
        """The ``limit`` oldest snapshot holders of the cluster (sessions, prepared
        transactions, replication slots), oldest first."""
        return await self._rows(conn, "health_xmin_horizon", {"limit": limit})

    async def connection_backend_pid(self, conn: AsyncConn) -> int:
        """The server process of ``conn``'s session (a pooler's connection was told another)."""
        return int((await self._rows(conn, "connection_backend_pid", {}))[0]["pid"])

    def connection_backend_pid_sync(self, conn: Conn) -> int:
        """:meth:`connection_backend_pid` on a sync connection."""
        return int(self._rows_sync(conn, "connection_backend_pid", {})[0]["pid"])
