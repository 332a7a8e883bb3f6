"""Statements of ``sql/tallies.sql``: the rollups of finished work."""

from __future__ import annotations

from datetime import datetime

from tickwork.db.store.runner import AsyncConn, Row, Runner


class TallyStatements(Runner):
    """One method per statement of ``sql/tallies.sql``."""

    async def tally_fold(self, conn: AsyncConn, *, limit: int) -> int:
        """Fold up to ``limit`` appended tallies into totals and minutes; how many."""
        found = await self._rows(conn, "tally_fold", {"limit": limit})
        return int(found[0]["folded"])

    async def tally_minutes_prune(self, conn: AsyncConn, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` throughput minutes older than ``older_than`` seconds."""
        params = {"older_than": older_than, "limit": limit}
        return len(await self._rows(conn, "tally_minutes_prune", params))

    async def tally_throughput(
        self,
        conn: AsyncConn,
        *,
        subject: str,
        name: str | None,
        start: datetime,
        end: datetime,
        step: float,
    ) -> list[Row]:
        """Rows ``bucket, name, state, n``: arrivals in each state per ``step`` seconds."""
        params = {"subject": subject, "name": name, "start": start, "end": end, "step": step}
        return await self._rows(conn, "tally_throughput", params)

    async def tally_recount_lock(self, conn: AsyncConn) -> None:
        """Hold new tallies back until the transaction ends (a recount runs in it)."""
        await self._rows(conn, "tally_recount_lock", {})

    async def tally_recount_clear(self, conn: AsyncConn) -> None:
        """Drop the totals (a recount makes them again, after folding every tally)."""
        await self._rows(conn, "tally_recount_clear", {})

    async def tally_recount(self, conn: AsyncConn) -> int:
        """Make the totals from the tables (a full count); how many jobs and signals they
        count. Run after the lock and the clear, in their transaction."""
        found = await self._rows(conn, "tally_recount", {})
        return sum(int(r["n"]) for r in found)
