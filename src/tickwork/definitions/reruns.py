"""What a retry of a definition's run runs: the definition as it is now, never the snapshot
the run was made with.

A run carries its definition in its job's arguments, so a run already made keeps the
version it was made with while it waits, runs and retries by itself. An operator's retry
(one job, or a bulk retry; through the API, the command line, MCP or the dashboard) is a new
decision to run code, and an OPERATOR may not decide which code runs: that is an ADMIN's. So a
retry puts the definition's current fields over the run's (its trigger, the webhook's
payload say, stays) and moves it to the queue of the definition's runtime now; and a run
whose definition was deleted (or whose arguments name none) is not retried at all
(:class:`~tickwork.errors.RerunRefused`, 409). The definitions are held FOR SHARE until the
retry commits, so an edit or a delete made meanwhile waits for it, and a retry never runs a
version replaced or removed while it was being made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tickwork.db.store import AsyncConn, Store
from tickwork.db.store.jobs import Rerun
from tickwork.definitions.records import RUNTIME_TASKS, Definition, dumps

__all__ = ["RerunPlan", "plan"]


@dataclass(frozen=True, slots=True)
class RerunPlan:
    """How a retry treats the definitions' runs among its jobs."""

    reruns: list[Rerun] = field(default_factory=list)
    """The runs it sends back, each with its definition's current fields and queue."""
    refused: dict[int, int | None] = field(default_factory=dict)
    """Runs it leaves as they are, by job id: the deleted definition's id (None when the
    arguments name none)."""


async def plan(conn: AsyncConn, store: Store, job_ids: list[int]) -> RerunPlan:
    """In the retry's transaction, before ``job_retry``: the definitions of the runs among
    ``job_ids`` that a retry may send back, locked FOR SHARE (an edit or a delete waits for
    the retry to commit), and what the retry does with each run."""
    runs = await store.definition_runs_retryable(conn, job_ids=job_ids, tasks=sorted(RUNTIME_TASKS))
    if not runs:
        return RerunPlan()
    ids = sorted({r["definition_id"] for r in runs if r["definition_id"] is not None})
    rows: list[dict[str, Any]] = await store.definition_lock_shared(conn, ids=ids) if ids else []
    current = {row["id"]: Definition.from_row(row) for row in rows}
    reruns: list[Rerun] = []
    refused: dict[int, int | None] = {}
    for run in runs:
        definition = current.get(run["definition_id"])
        if definition is None:
            refused[run["job_id"]] = run["definition_id"]
        else:  # even at the same version: the stored definition, not what the run claims
            reruns.append(Rerun(run["job_id"], dumps(definition.run_fields()), definition.queue))
    return RerunPlan(reruns, refused)
