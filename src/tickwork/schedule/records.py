"""What a schedule is: defined in code (:class:`ScheduleSpec`) or as stored
(:class:`StoredSchedule`), its misfire and overlap policies, and the options its jobs take."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.config import DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE
from tickwork.queue.options import TaskOptions
from tickwork.schedule.cron import CronSchedule
from tickwork.types import from_row

DEFAULT_MISFIRE_LIMIT = 100
"""Most missed fire times a schedule with misfire ALL makes up for."""


class Misfire(enum.StrEnum):
    """What a schedule does with fire times missed while no scheduler ran."""

    ONCE = "ONCE"
    """Run one job for the whole missed window (for its latest fire time). The default."""
    ALL = "ALL"
    """Run every missed fire time, the latest ``misfire_limit`` of them."""
    SKIP = "SKIP"
    """Run nothing for the missed window; carry on from the next fire time."""


class Overlap(enum.StrEnum):
    """What a schedule does when its previous job has not finished."""

    ALLOW = "ALLOW"
    """Enqueue anyway."""
    SKIP = "SKIP"
    """Skip this fire time while a job of the schedule is PENDING, FAILED or RUNNING."""


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule as defined in code (``@app.schedule`` / ``app.add_schedule``)."""

    name: str
    task: str
    cron: CronSchedule
    args: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    misfire: Misfire = Misfire.ONCE
    misfire_limit: int = DEFAULT_MISFIRE_LIMIT
    overlap: Overlap = Overlap.ALLOW


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A schedule as stored (what operators list, pause and resume)."""

    name: str
    task: str
    cron: str
    timezone: str
    misfire: str
    overlap: str
    enabled: bool
    paused: bool
    next_run_at: datetime
    last_fire_at: datetime | None
    args: dict[str, Any] = field(default_factory=dict)
    """Arguments of each job."""
    queue: str | None = None
    """The jobs' queue (None: the task's)."""
    priority: int | None = None
    """The jobs' priority (None: the task's)."""
    misfire_limit: int = DEFAULT_MISFIRE_LIMIT
    """Most missed fire times made up for under misfire ALL."""
    origin: str = "code"
    """"code" (rewritten from the code at every start) or "api" (stored by an operator)."""
    omitted: tuple[str, ...] = ()
    """Fields left out of this read (``args`` empty): nested too deep to be served."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StoredSchedule:
        """A ``schedules`` row."""
        return from_row(cls, row)


def task_targets(options: TaskOptions | None) -> dict[str, Any]:
    """The ``task_*`` columns of a schedule: what its jobs take from the task's registration
    (all None for a task this process does not register)."""
    return {
        "task_queue": options.queue if options else None,
        "task_priority": options.priority if options else None,
        "task_max_attempts": options.max_attempts if options else None,
        "task_timeout": options.timeout if options else None,
    }


def job_options(options: TaskOptions | None, schedule: Mapping[str, Any]) -> dict[str, Any]:
    """Queue, priority, attempts and timeout of a schedule's job: the schedule's own queue and
    priority; else the task's registration stored with the schedule (``task_*``, written by
    the process that defined or stored it), so that whichever process holds the SCHEDULER
    lease enqueues the same job; else, for rows stored without one, this process's
    registration of the task (``options``); else the defaults."""
    if schedule.get("task_queue") is not None:  # the four are written together
        chosen = {
            "queue": schedule["task_queue"],
            "priority": schedule["task_priority"],
            "max_attempts": schedule["task_max_attempts"],
            "timeout": schedule["task_timeout"],
        }
    else:
        chosen = {
            "queue": options.queue if options else DEFAULT_QUEUE,
            "priority": options.priority if options else DEFAULT_PRIORITY,
            "max_attempts": options.max_attempts if options else DEFAULT_MAX_ATTEMPTS,
            "timeout": options.timeout if options else None,
        }
    if schedule["queue"]:
        chosen["queue"] = schedule["queue"]
    if schedule["priority"] is not None:
        chosen["priority"] = schedule["priority"]
    return chosen
