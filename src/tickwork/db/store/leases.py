"""Statements of ``sql/leases.sql``: leader leases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tickwork.db.store.runner import AsyncConn, Row, Runner
from tickwork.types import Leader, from_row


def _leader(row: Row) -> Leader:
    return from_row(Leader, row)


class LeaseStatements(Runner):
    """Who holds which leader lease."""

    async def lease_attempt_elect(
        self, conn: AsyncConn, *, holder: str, ttls: Mapping[str, float]
    ) -> list[Row]:
        """Acquire or renew the leases named in ``ttls`` for ``holder``, each for its time
        to live in seconds (taken over only when expired or its own); rows ``name,
        expires_at, db_now`` of the leases it holds afterwards."""
        names = list(ttls)
        return await self._rows(
            conn,
            "lease_attempt_elect",
            {"holder": holder, "names": names, "ttls": [ttls[name] for name in names]},
        )

    async def lease_release(self, conn: AsyncConn, *, holder: str, names: Sequence[str]) -> None:
        """Give up ``names`` where ``holder`` holds them."""
        await self._rows(conn, "lease_release", {"holder": holder, "names": list(names)})

    async def lease_list(self, conn: AsyncConn) -> list[Leader]:
        """Every lease, live or expired."""
        return [_leader(row) for row in await self._rows(conn, "lease_list", {})]
