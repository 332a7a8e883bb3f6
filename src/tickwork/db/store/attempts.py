"""Statements of the executor's path: claims, outcomes, progress, lease renewal, reclaims,
worker registration (from ``sql/jobs.sql``, ``sql/executions.sql``, ``sql/workers.sql``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from tickwork.db.store.runner import AsyncConn, Row, Runner


class AttemptStatements(Runner):
    """One method per statement the executor, the watchdog and retention run."""

    # -- jobs.sql -------------------------------------------------------------------------

    async def job_claim(
        self,
        conn: AsyncConn,
        *,
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        worker_id: UUID,
        lease_ttl: float,
    ) -> list[tuple[Any, ...]]:
        """Claim up to ``limit`` runnable jobs of ``queues`` and ``tasks`` for ``worker_id``,
        starting one execution each with a lease of ``lease_ttl`` seconds; one tuple per job,
        its fields in the order of ``Job``'s (``args`` as JSON text), then the execution id and
        the seconds it waited after it was due."""
        return await self._tuples(
            conn,
            "job_claim",
            {
                "queues": list(queues),
                "tasks": list(tasks),
                "limit": limit,
                "worker_id": worker_id,
                "lease_ttl": lease_ttl,
            },
        )

    async def job_claim_capped(
        self,
        conn: AsyncConn,
        *,
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        sync_tasks: Sequence[str],
        sync_limit: int,
        worker_id: UUID,
        lease_ttl: float,
    ) -> list[tuple[Any, ...]]:
        """:meth:`job_claim` of ``tasks`` and ``sync_tasks``, at most ``sync_limit`` jobs of
        ``sync_tasks`` (a worker's free threads); the same tuples."""
        return await self._tuples(
            conn,
            "job_claim_capped",
            {
                "queues": list(queues),
                "tasks": list(tasks),
                "limit": limit,
                "sync_tasks": list(sync_tasks),
                "sync_limit": sync_limit,
                "worker_id": worker_id,
                "lease_ttl": lease_ttl,
            },
        )

    async def job_complete_many(self, conn: AsyncConn, *, outcomes: str) -> list[tuple[Any, ...]]:
        """Record the outcomes of finished attempts (``outcomes``: a JSON array of
        ``{job_id, execution_id, outcome, result, error, retry_delay, progress}``), fenced to
        live attempts; tuples ``(execution id, job state)`` of the exceptions only: a job that
        did not end in the state named like its outcome, or a fenced attempt (state None)."""
        return await self._tuples(conn, "job_complete_many", {"outcomes": outcomes})

    async def job_dead_letter_undecodable(
        self, conn: AsyncConn, *, undecodable: str
    ) -> list[tuple[Any, ...]]:
        """End claimed attempts whose job's row could not be decoded (``undecodable``: a JSON
        array of ``{job_id, execution_id, message}``), their jobs dead-lettered (cancelled
        when a cancel was requested), fenced to live attempts; tuples ``(job id, state,
        notified)``, one per job ended."""
        return await self._tuples(conn, "job_dead_letter_undecodable", {"undecodable": undecodable})

    async def job_progress_many(self, conn: AsyncConn, *, reports: str) -> None:
        """Store the progress of running attempts (``reports``: a JSON array of
        ``{job_id, execution_id, progress}``), only where the attempt is still the live one."""
        await self._rows(conn, "job_progress_many", {"reports": reports})

    async def job_prune_finished(
        self, conn: AsyncConn, *, finished_after: float, dead_letter_after: float, limit: int
    ) -> int:
        """Delete up to ``limit`` jobs finished longer ago than their window (seconds), with
        their executions, skipping rows others hold; how many were deleted."""
        return len(
            await self._rows(
                conn,
                "job_prune_finished",
                {
                    "finished_after": finished_after,
                    "dead_letter_after": dead_letter_after,
                    "limit": limit,
                },
            )
        )

    async def job_tables_vacuum(self, conn: AsyncConn) -> None:
        """Vacuum and analyse the job tables (``conn`` must not be in a transaction)."""
        await self._rows(conn, "job_tables_vacuum", {})

    async def job_dead_rows(self, conn: AsyncConn) -> int:
        """The dead row versions in the jobs table, by the server's statistics."""
        return int((await self._rows(conn, "job_dead_rows", {}))[0]["dead"])

    async def job_vacuum(self, conn: AsyncConn) -> None:
        """Vacuum the jobs table alone, unless a vacuum is already at work on it (``conn``
        must not be in a transaction)."""
        await self._rows(conn, "job_vacuum", {})

    # -- executions.sql -------------------------------------------------------------------

    async def execution_reclaim_expired(
        self, conn: AsyncConn, *, limit: int, actor: str
    ) -> list[Row]:
        """Time out up to ``limit`` attempts whose lease expired and send their jobs back
        (PENDING, DEAD_LETTER or CANCELLED), audited as ``actor``; rows
        ``job_id, execution_id, state, notified`` of the jobs reclaimed."""
        return await self._rows(conn, "execution_reclaim_expired", {"limit": limit, "actor": actor})

    async def execution_live_signature(self, conn: AsyncConn) -> tuple[int, int, str]:
        """Changes whenever the live attempts do (a claim, an end): their count, largest id
        and the sum of their ids."""
        found = (await self._rows(conn, "execution_live_signature", {}))[0]
        return int(found["n"]), int(found["top"]), str(found["total"])

    async def execution_release_many(
        self, conn: AsyncConn, *, job_ids: Sequence[int], execution_ids: Sequence[int]
    ) -> list[Row]:
        """Hand unfinished live attempts back at shutdown (their jobs PENDING, or CANCELLED
        when a cancel was requested; the attempt does not count); rows
        ``job_id, execution_id, state, notified`` of the jobs returned."""
        return await self._rows(
            conn,
            "execution_release_many",
            {"job_ids": list(job_ids), "execution_ids": list(execution_ids)},
        )

    async def execution_renew_leases(
        self,
        conn: AsyncConn,
        *,
        job_ids: Sequence[int],
        execution_ids: Sequence[int],
        lease_ttl: float,
    ) -> list[Row]:
        """Extend the leases of live attempts by ``lease_ttl`` seconds; rows
        ``id, cancel_requested, renewed`` per attempt still RUNNING (not renewed: locked
        right now); an attempt missing from the answer has lost its lease."""
        return await self._rows(
            conn,
            "execution_renew_leases",
            {
                "job_ids": list(job_ids),
                "execution_ids": list(execution_ids),
                "lease_ttl": lease_ttl,
            },
        )

    # -- workers.sql ----------------------------------------------------------------------

    async def worker_register(
        self,
        conn: AsyncConn,
        *,
        worker_id: UUID,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        tasks: Sequence[str],
        task_options: str,
    ) -> None:
        """Record a starting worker, the tasks it runs and what they give their jobs
        (``task_options``: JSON text, by task name)."""
        await self._rows(
            conn,
            "worker_register",
            {
                "id": worker_id,
                "host": host,
                "pid": pid,
                "queues": list(queues),
                "concurrency": concurrency,
                "tasks": list(tasks),
                "task_options": task_options,
            },
        )

    async def worker_heartbeat(
        self, conn: AsyncConn, *, worker_id: UUID, tasks: Sequence[str], task_options: str
    ) -> None:
        """Mark a worker seen now, with the tasks it runs now (``task_options``: JSON text)."""
        await self._rows(
            conn,
            "worker_heartbeat",
            {"id": worker_id, "tasks": list(tasks), "task_options": task_options},
        )

    async def worker_stop(self, conn: AsyncConn, *, worker_id: UUID) -> None:
        """Mark a worker stopped."""
        await self._rows(conn, "worker_stop", {"id": worker_id})
