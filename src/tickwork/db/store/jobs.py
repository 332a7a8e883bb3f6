"""Statements of ``sql/jobs.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


class JobStatements(Runner):
    """One method per statement of ``sql/jobs.sql``."""

    async def job_get(self, conn: AsyncConn, *, job_id: int) -> Row | None:
        """The row of one job (``job_row`` columns), or None."""
        found = await self._rows(conn, "job_get", {"job_id": job_id})
        return found[0] if found else None

    def job_get_sync(self, conn: Conn, *, job_id: int) -> Row | None:
        """:meth:`job_get` on a sync connection."""
        found = self._rows_sync(conn, "job_get", {"job_id": job_id})
        return found[0] if found else None
