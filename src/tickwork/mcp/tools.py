"""The MCP endpoint's tools, resources and prompts: each tool one REST route, called through
the :class:`~tickwork.mcp.bridge.Bridge` as the person whose token the assistant holds.

A tool's input schema comes from its typed parameters, its output schema from the REST
route's own response model, so both say exactly what the API takes and answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, RootModel

from tickwork.api.schemas import DefinitionPage, JobDetailOut, JobOut, JobPage, RunOut, ScheduleOut
from tickwork.api.signals import StatsOut
from tickwork.mcp.bridge import ApiProblem
from tickwork.mcp.protocol import ResourceMissing
from tickwork.ops.health import Health
from tickwork.queue import admin
from tickwork.signals.records import Signal
from tickwork.types import Leader

Call = Callable[..., Awaitable[Any]]
"""``call(method, path, params=..., body=...)``: the REST route's answer, as the caller."""

JobState = Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "DEAD_LETTER"]
JobId = Annotated[int, Field(ge=1, description="the job's id")]
QueueName = Annotated[str, Field(min_length=1, max_length=200, description="the queue's name")]
DOCS = Path(__file__).resolve().parents[1] / "docs"
"""The documentation pages shipped in the package (``tickwork/docs``)."""


def hints(
    *,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
) -> ToolAnnotations:
    """A tool's hints, every one stated (the specification's defaults for an unstated one
    are the cautious guesses: destructive, reaching the open world)."""
    return ToolAnnotations(
        readOnlyHint=read_only,
        destructiveHint=destructive,
        idempotentHint=idempotent,
        openWorldHint=open_world,
    )


READ = hints(read_only=True, idempotent=True)
"""Reads tickwork's own records."""
SETS = hints(idempotent=True)
"""Sets a state that the next call leaves as it is, and another tool sets back (pause,
resume)."""
ENDS = hints(destructive=True, idempotent=True)
"""Ends or removes something for good (a cancelled job is not retried; a deleted one is
gone); the next call finds it ended."""
RUNS = hints(open_world=True)
"""Makes work run, each call once more: a task (the application's code), a definition's
HTTP call or script, a signal's reactors - and whatever those reach outside tickwork."""


class SignalOut(RootModel[Signal]):
    """A signal (the REST answer's own shape)."""


class HealthOut(RootModel[Health]):
    """The doctor's report (the REST answer's own shape)."""


class JobReport(BaseModel):
    """A job with every attempt and its timeline."""

    job: JobDetailOut
    timeline: list[admin.TimelineEntry]


class JobDeleted(BaseModel):
    """A job deleted (the audit trail keeps who did it)."""

    job_id: int
    deleted: bool


class QueueState(BaseModel):
    """A queue after a pause or a resume."""

    queue: str
    paused: bool


def segment(text: str, field: str) -> str:
    """``text`` as one path segment: a name holding ``/`` names nothing else, and ``.`` or
    ``..`` (which an address would fold into another route) is refused."""
    if text in (".", ".."):
        problem = {"status": 400, "title": "Bad Request", "detail": f"{field} cannot be {text}"}
        raise ToolError(json.dumps(problem | {"field": field}))
    return quote(text, safe="")


def register(server: FastMCP, call: Call) -> None:
    """Add every tool, resource and prompt to ``server``, each calling the API by ``call``."""
    _jobs(server, call)
    _queues_and_schedules(server, call)
    _definitions_and_signals(server, call)
    _cluster(server, call)
    _resources(server, call)
    _prompts(server)


def _jobs(server: FastMCP, call: Call) -> None:
    @server.tool(annotations=READ, structured_output=True)
    async def list_jobs(
        state: Annotated[list[JobState] | None, Field(description="any of these states")] = None,
        queue: Annotated[
            str | None, Field(max_length=200, description="exactly this queue")
        ] = None,
        task: Annotated[
            str | None, Field(max_length=200, description="exactly this task name")
        ] = None,
        search: Annotated[
            str | None,
            Field(
                max_length=200,
                description="text in the id, task, unique key, creator, arguments, result or"
                " errors (any case; '#42' for job 42 only)",
            ),
        ] = None,
        created_from: Annotated[datetime | None, Field(description="created at or after")] = None,
        created_to: Annotated[datetime | None, Field(description="created before")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="jobs per page")] = 20,
        before_id: Annotated[
            int | None, Field(ge=1, description="next_cursor of the previous page")
        ] = None,
    ) -> JobPage:
        """Jobs, newest first, a page at a time, filtered (GET /api/jobs). A search reads at
        most 20,000 jobs per page: a page may hold fewer matches and still have a
        next_cursor to search on from."""
        params = {
            "state": ",".join(state) if state else None,
            "queue": queue,
            "task": task,
            "q": search,
            "created_from": created_from.isoformat() if created_from else None,
            "created_to": created_to.isoformat() if created_to else None,
            "limit": limit,
            "before_id": before_id,
        }
        return await call("GET", "/api/jobs", params=params)  # type: ignore[no-any-return]

    @server.tool(annotations=READ, structured_output=True)
    async def get_job(job_id: JobId) -> JobReport:
        """One job: arguments, result, every attempt with its error and traceback, and its
        timeline (created, claimed, failed, retried, cancelled, by whom)."""
        job = await call("GET", f"/api/jobs/{job_id}")
        timeline = await call("GET", f"/api/jobs/{job_id}/timeline")
        return JobReport.model_validate({"job": job, "timeline": timeline})

    @server.tool(annotations=RUNS, structured_output=True)
    async def retry_job(job_id: JobId) -> JobOut:
        """Send a DEAD_LETTER or FAILED job back to PENDING now (OPERATOR; audited). A
        definition's run is retried with the definition as it is now; one of a deleted
        definition is refused (409)."""
        return await call("POST", f"/api/jobs/{job_id}/retry")  # type: ignore[no-any-return]

    @server.tool(annotations=ENDS, structured_output=True)
    async def cancel_job(job_id: JobId) -> JobOut:
        """Cancel a PENDING or FAILED job now, a RUNNING one when its attempt stops
        (OPERATOR; audited)."""
        return await call("POST", f"/api/jobs/{job_id}/cancel")  # type: ignore[no-any-return]

    @server.tool(annotations=ENDS, structured_output=True)
    async def delete_job(job_id: JobId) -> JobDeleted:
        """Delete a job that is not RUNNING, with its attempts: it cannot be undone (OPERATOR;
        audited as job.deleted). A RUNNING job is refused (409): cancel it first."""
        await call("DELETE", f"/api/jobs/{job_id}")
        return JobDeleted(job_id=job_id, deleted=True)

    @server.tool(annotations=RUNS, structured_output=True)
    async def enqueue_job(
        task: Annotated[str, Field(min_length=1, max_length=200, description="a task name")],
        args: Annotated[
            dict[str, Any] | None, Field(description="the task's keyword arguments")
        ] = None,
        queue: Annotated[str | None, Field(description="default: the task's queue")] = None,
        priority: Annotated[int | None, Field(description="higher runs first")] = None,
        max_attempts: Annotated[int | None, Field(ge=1, description="attempts in all")] = None,
        run_at: Annotated[datetime | None, Field(description="not before this time")] = None,
        unique_key: Annotated[
            str | None, Field(description="a job holding this key already is answered instead")
        ] = None,
    ) -> JobOut:
        """Enqueue a job of a task that the serving app or a recent worker defines
        (OPERATOR; audited). Definitions' runs are made with run_definition instead."""
        body = {
            "task": task,
            "args": args or {},
            "queue": queue,
            "priority": priority,
            "max_attempts": max_attempts,
            "run_at": run_at.isoformat() if run_at else None,
            "unique_key": unique_key,
        }
        sent = {k: v for k, v in body.items() if v is not None}
        return await call("POST", "/api/jobs", body=sent)  # type: ignore[no-any-return]


def _queues_and_schedules(server: FastMCP, call: Call) -> None:
    @server.tool(annotations=READ, structured_output=True)
    async def queue_stats() -> list[admin.QueueStats]:
        """Every queue: jobs by state, the oldest waiting job, throughput over the last
        five minutes, paused or not."""
        return await call("GET", "/api/queues")  # type: ignore[no-any-return]

    @server.tool(annotations=SETS, structured_output=True)
    async def pause_queue(name: QueueName) -> QueueState:
        """Stop claims from a queue (running jobs finish; OPERATOR; audited)."""
        await call("POST", "/api/queues/" + segment(name, "name") + "/pause")
        return QueueState(queue=name, paused=True)

    @server.tool(annotations=SETS, structured_output=True)
    async def resume_queue(name: QueueName) -> QueueState:
        """Let workers claim from a paused queue again (OPERATOR; audited)."""
        await call("POST", "/api/queues/" + segment(name, "name") + "/resume")
        return QueueState(queue=name, paused=False)

    @server.tool(annotations=READ, structured_output=True)
    async def list_schedules() -> list[ScheduleOut]:
        """Every stored schedule: task, cron, time zone, next and last fire, paused."""
        return await call("GET", "/api/schedules")  # type: ignore[no-any-return]

    @server.tool(annotations=RUNS, structured_output=True)
    async def trigger_schedule(
        name: Annotated[str, Field(min_length=1, max_length=200, description="its name")],
    ) -> JobOut:
        """Enqueue a schedule's job now, outside its cron (OPERATOR; audited)."""
        path = "/api/schedules/" + segment(name, "name") + "/trigger"
        return await call("POST", path)  # type: ignore[no-any-return]


def _definitions_and_signals(server: FastMCP, call: Call) -> None:
    @server.tool(annotations=READ, structured_output=True)
    async def list_definitions(
        kind: Annotated[Literal["http", "script"] | None, Field(description="one kind")] = None,
        name: Annotated[str | None, Field(max_length=200, description="a part of the name")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 50,
        after: Annotated[
            int | None, Field(ge=1, description="next_cursor of the last page")
        ] = None,
    ) -> DefinitionPage:
        """HTTP and script jobs defined at runtime, by id: kind, spec, schedule, runs."""
        params = {"kind": kind, "name": name, "limit": limit, "after": after}
        return await call("GET", "/api/definitions", params=params)  # type: ignore[no-any-return]

    @server.tool(annotations=RUNS, structured_output=True)
    async def run_definition(
        definition_id: Annotated[int, Field(ge=1, description="the definition's id")],
    ) -> RunOut:
        """Run a definition now (OPERATOR; audited): the run's job id; get_job and the
        resource tickwork://jobs/{id}/output show how it went."""
        path = f"/api/definitions/{definition_id}/run"
        return await call("POST", path)  # type: ignore[no-any-return]

    @server.tool(annotations=READ, structured_output=True)
    async def signal_stats() -> list[StatsOut]:
        """Signals by status and type, with the oldest waiting one of each (ADMIN)."""
        return await call("GET", "/api/admin/signals/stats")  # type: ignore[no-any-return]

    @server.tool(annotations=READ, structured_output=True)
    async def stuck_signals(
        older_than: Annotated[
            float | None, Field(gt=0, description="seconds; default: the configured threshold")
        ] = None,
    ) -> list[Signal]:
        """Signals processing for longer than they should: a hung reactor or a dead
        processor (ADMIN)."""
        params = {"older_than": older_than}
        return await call("GET", "/api/admin/signals/stuck", params=params)  # type: ignore[no-any-return]

    @server.tool(annotations=RUNS, structured_output=True)
    async def retry_signal(
        signal_id: Annotated[int, Field(ge=1, description="the signal's id")],
    ) -> SignalOut:
        """Deliver a signal again to every reactor that failed it (ADMIN; audited)."""
        path = f"/api/admin/signals/{signal_id}/retry"
        return await call("POST", path)  # type: ignore[no-any-return]

    @server.tool(annotations=RUNS, structured_output=True)
    async def retry_delivery(
        signal_id: Annotated[int, Field(ge=1, description="the signal's id")],
        reactor: Annotated[str, Field(min_length=1, max_length=200, description="its name")],
    ) -> SignalOut:
        """Deliver a signal again to one reactor (ADMIN; audited)."""
        one = segment(reactor, "reactor")
        path = f"/api/admin/signals/{signal_id}/reactors/{one}/retry"
        return await call("POST", path)  # type: ignore[no-any-return]


def _cluster(server: FastMCP, call: Call) -> None:
    @server.tool(annotations=READ, structured_output=True)
    async def health() -> HealthOut:
        """The doctor's report: database, migrations, what holds the xmin horizon back,
        table bloat, warnings with what to do (OPERATOR)."""
        return await call("GET", "/api/health")  # type: ignore[no-any-return]

    @server.tool(annotations=READ, structured_output=True)
    async def leaders() -> list[Leader]:
        """Who holds each singleton role (scheduler, watchdog, retention, ...) and until
        when."""
        return await call("GET", "/api/leaders")  # type: ignore[no-any-return]

    @server.tool(annotations=READ, structured_output=True)
    async def workers() -> list[admin.WorkerInfo]:
        """Live worker processes: their queues, tasks, busy slots, last heartbeat."""
        return await call("GET", "/api/workers")  # type: ignore[no-any-return]


def _resources(server: FastMCP, call: Call) -> None:
    for page in sorted(DOCS.glob("**/*.md")):  # the guides, tutorials/ and reference/
        _doc_resource(server, page)

    @server.resource(
        "tickwork://jobs/{job_id}/output",
        name="job-output",
        description="What a job's run wrote: a script's stdout and stderr (so far, while it"
        " runs), an HTTP call's answer, a task's result, or its last error",
        mime_type="text/plain",
    )
    async def job_output(job_id: str) -> str:
        if not (job_id.isascii() and job_id.isdigit()):
            raise ResourceMissing(f"no job is numbered {job_id!r}")
        try:
            job = await call("GET", f"/api/jobs/{int(job_id)}")
        except ApiProblem as exc:
            if exc.status == 404:
                raise ResourceMissing(str(exc)) from exc
            raise
        return output_text(job)


def _doc_resource(server: FastMCP, page: Path) -> None:
    name = page.relative_to(DOCS).with_suffix("").as_posix()  # tutorials/first-task

    @server.resource(
        f"tickwork://docs/{name}",
        name=f"docs-{name.replace('/', '-')}",
        description=f"tickwork's documentation: {name}",
        mime_type="text/markdown",
    )
    def doc() -> str:
        return page.read_text(encoding="utf-8")


def output_text(job: dict[str, Any]) -> str:
    """A job's output as text: streams of a script, else its result or error as JSON."""
    result = job.get("result")
    progress = job.get("progress") or {}
    if job.get("state") == "RUNNING" and progress.get("output"):
        streams = progress["output"]
        head = "(running: the last 4 kB written so far)\n"
        return head + _streams(streams.get("stdout", ""), streams.get("stderr", ""))
    if isinstance(result, dict) and "stdout" in result:
        return _streams(result.get("stdout", ""), result.get("stderr", ""))
    if job.get("error"):
        return json.dumps(job["error"], indent=2)
    return json.dumps(result, indent=2)


def _streams(stdout: str, stderr: str) -> str:
    return f"--- stdout ---\n{stdout}" + (f"\n--- stderr ---\n{stderr}" if stderr else "")


def _prompts(server: FastMCP) -> None:
    @server.prompt(description="Find out why a queue is backing up, and what to do about it")
    def queue_backing_up(
        queue: Annotated[str, Field(description="the queue that is backing up")],
    ) -> str:
        return (
            f"The tickwork queue {queue!r} is backing up. Find out why, using the tickwork "
            "tools, and say what to do. Look at: queue_stats (is it paused? how many pending "
            "and running, the oldest waiting job, the throughput over five minutes); workers "
            "(does any live worker claim from this queue, with free slots?); list_jobs with "
            f"state RUNNING and queue {queue!r} (are attempts stuck?), and with state FAILED "
            "or DEAD_LETTER (is a task failing and retrying?); get_job on one of those for its "
            "error; health (is the database in trouble: xmin horizon, bloat); leaders. Do not "
            "retry, cancel, delete or resume anything without asking first."
        )

    @server.prompt(description="Explain why a job failed and whether retrying would help")
    def why_did_it_fail(
        job_id: Annotated[str, Field(description="the job's id")],
    ) -> str:
        return (
            f"Explain why tickwork job {job_id} failed. Use get_job for its attempts, error "
            f"and traceback and its timeline, and the resource tickwork://jobs/{job_id}/output "
            "for what it wrote. Say whether the cause is in the job's input, its code or "
            "something outside (a service down, a timeout), and whether retry_job would help. "
            "Ask before retrying."
        )
