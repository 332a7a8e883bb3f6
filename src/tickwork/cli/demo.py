"""``tickwork demo``: the job path end to end, with a readable summary.

A schedule fires every two seconds while five jobs run: one succeeds, one fails twice and
then succeeds on retry, one exhausts its attempts and is dead-lettered, one is cancelled
while pending, one is cancelled while running (the deferred cancel). A worker runs in this
process until every job has settled and the schedule has fired twice. Then twenty signals
for one aggregate key squash into one, which a reactor handles once after its debounce
window, enqueueing a follow-up job in the same transaction.

The demo runs in a schema of its own (the configured one's name + ``_demo``), made afresh
for each run and dropped when the run ends, however it ends: a ``serve`` or worker on the
configured schema never sees its schedule or jobs, and it never competes for their leases.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.table import Table

from tickwork.app import App
from tickwork.config import load_settings
from tickwork.db.scratch import scratch_schema
from tickwork.queue.backoff import FixedBackoff
from tickwork.services.host import WORKER_ROLES
from tickwork.services.leases import Role
from tickwork.signals import Reactor, ReactorContext, Signal
from tickwork.types import Job, JobState
from tickwork.worker.attempt import Outcome
from tickwork.worker.context import JobContext

DEMO_QUEUE = "demo"
SCHEMA_SUFFIX = "_demo"
HEARTBEAT_SCHEDULE = "demo-heartbeat"
HEARTBEATS_TO_SEE = 2


SIGNAL_TYPE = "RESULT_SET_CHANGED"
SIGNALS_TO_EMIT = 20
DEBOUNCE_SECONDS = 1.0


class Recalculate(Reactor):
    """Recalculates a series' standings once per burst of result changes."""

    name = "demo-recalc"
    handles = frozenset({SIGNAL_TYPE})

    def __init__(self, app: App) -> None:
        self.app = app
        self.handled: list[int] = []
        self.done = asyncio.Event()

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        # The follow-up job commits together with this reactor's COMPLETED record: once.
        job = await self.app.enqueue_async(
            "demo.greet", {"name": f"standings of {signal.aggregate_key}"}, conn=ctx.conn
        )
        self.handled.append(job.id)
        self.done.set()


def demo_schema(schema: str) -> str:
    """The demo's own schema beside ``schema`` (within the 54 characters of a schema name)."""
    return schema[: 54 - len(SCHEMA_SUFFIX)] + SCHEMA_SUFFIX


def build_app() -> tuple[App, asyncio.Event]:
    """The demo's tasks, registered on a fresh App on the demo's own schema."""
    app = App(
        schema=demo_schema(load_settings().schema_name),
        scheduler={"interval": 0.5},
        signals={
            "debounce": {SIGNAL_TYPE: DEBOUNCE_SECONDS},
            "reactors": {"demo-recalc": {"enabled": True, "organisations": ["1"]}},
        },
    )
    slow_started = asyncio.Event()

    @app.task(name="demo.greet", queue=DEMO_QUEUE)
    def greet(name: str) -> str:
        return f"hello, {name}"

    @app.task(name="demo.flaky", queue=DEMO_QUEUE, backoff=FixedBackoff(0.2), pass_context=True)
    def flaky(ctx: JobContext, fail_times: int) -> dict[str, int]:
        if ctx.attempt <= fail_times:
            raise ConnectionError(f"upstream unavailable (attempt {ctx.attempt})")
        return {"succeeded_on_attempt": ctx.attempt}

    @app.task(name="demo.doomed", queue=DEMO_QUEUE, max_attempts=3, backoff=FixedBackoff(0.1))
    def doomed(order_id: int) -> None:
        raise ValueError(f"order {order_id} has no shipping address")

    @app.task(name="demo.report", queue=DEMO_QUEUE)
    def report(month: str) -> str:
        return f"report for {month}"

    @app.schedule("*/2 * * * * *", name=HEARTBEAT_SCHEDULE)
    @app.task(name="demo.heartbeat", queue=DEMO_QUEUE)
    def heartbeat() -> str:
        return "still here"

    @app.task(name="demo.export", queue=DEMO_QUEUE)
    async def export(rows: int) -> int:
        slow_started.set()
        await asyncio.sleep(3600)  # cancelled cooperatively long before this ends
        return rows

    app.add_reactor(Recalculate(app))
    return app, slow_started


async def _signals(app: App, console: Console) -> None:
    """Twenty emits for one key squash into one signal; the reactor handles it once."""
    reactor = app.reactors.get("demo-recalc")
    assert isinstance(reactor, Recalculate)
    emitted = [
        await app.signals.emit_async(
            SIGNAL_TYPE, "Result", n, "series:8", organisation_id=1, payload={"result": n}
        )
        for n in range(1, SIGNALS_TO_EMIT + 1)
    ]
    squashed = sum(e.squashed for e in emitted)
    console.print(
        f"emitted {SIGNALS_TO_EMIT} {SIGNAL_TYPE} signals for series:8: "
        f"{len({e.signal_id for e in emitted})} signal ({squashed} squashed into it), "
        f"debounce window {DEBOUNCE_SECONDS:g}s"
    )
    runtime = app.signal_runtime(await app.db.async_pool())
    await runtime.leases.run_once()
    if not runtime.leases.holds(Role.SIGNAL_MASTER):
        console.print("another process holds SIGNAL_MASTER: it will process the signal")
        return
    while not reactor.done.is_set():  # the demo waits out the window; tests move the clock
        await runtime.processor.run_once()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reactor.done.wait(), 0.2)
    await runtime.leases.release()
    console.print(
        f"reactor demo-recalc handled signal {emitted[0].signal_id} once, after the window "
        f"slid past the last emit; it enqueued follow-up job {reactor.handled[0]}"
    )


async def _run(app: App, slow_started: asyncio.Event, console: Console) -> list[Job]:
    try:
        return await _show(app, slow_started, console)
    finally:  # nothing of this loop may hold a lock on the schema when it is dropped
        await app.aclose()


async def _show(app: App, slow_started: asyncio.Event, console: Console) -> list[Job]:
    await asyncio.to_thread(app.migrate)
    jobs = [
        await app.enqueue_async("demo.greet", {"name": "world"}),
        await app.enqueue_async("demo.flaky", {"fail_times": 2}),
        await app.enqueue_async("demo.doomed", {"order_id": 42}),
        await app.enqueue_async(
            "demo.report", {"month": "2026-12"}, run_at=datetime.now(UTC) + timedelta(hours=1)
        ),
        await app.enqueue_async("demo.export", {"rows": 10_000}),
    ]
    console.print(f"enqueued {len(jobs)} jobs on queue [bold]{DEMO_QUEUE}[/]")
    await asyncio.to_thread(app.cancel, jobs[3].id, actor="demo")
    console.print(f"cancelled pending job {jobs[3].id} (demo.report)")

    waiting = {job.id for job in jobs} - {jobs[3].id}
    heartbeats: list[int] = []
    settled = asyncio.Event()

    def on_finished(outcome: Outcome) -> None:
        if outcome.task == "demo.heartbeat" and outcome.job_state is JobState.SUCCEEDED:
            heartbeats.append(outcome.job_id)
        elif outcome.job_state is not None and outcome.job_state.is_final:
            waiting.discard(outcome.job_id)
        if not waiting and len(heartbeats) >= HEARTBEATS_TO_SEE:
            settled.set()

    services = app.services(  # the executor, the watchdog, the scheduler (the heartbeat)
        await app.db.async_pool(),
        WORKER_ROLES,
        queues=[DEMO_QUEUE],
        concurrency=4,
        on_finished=on_finished,
        poll_interval=0.2,
    )
    running = asyncio.create_task(services.run())
    interrupted = True
    try:
        await slow_started.wait()
        await asyncio.to_thread(app.cancel, jobs[4].id, actor="demo")
        console.print(f"requested cancel of running job {jobs[4].id} (demo.export)")
        await settled.wait()
        interrupted = False
    finally:  # Ctrl-C too: the worker shuts down its own way, not cancelled mid-step
        services.request_stop(immediate=interrupted)
        await running
    await _signals(app, console)
    for job_id in heartbeats:
        fired = await app.get_job_async(job_id)
        when = fired.fire_time.isoformat(timespec="seconds") if fired.fire_time else "?"
        console.print(
            f"schedule {HEARTBEAT_SCHEDULE} ('*/2 * * * * *') fired job {job_id} "
            f"for {when}: {fired.state.value}"
        )
    return [await app.get_job_async(job.id) for job in jobs]


def run_demo(console: Console | None = None) -> None:
    """Run the demo in its own schema, print what happened to every job, drop the schema."""
    console = console or Console()
    app, slow_started = build_app()
    schema = app.settings.schema_name
    where = "TICKWORK_DATABASE_URL" if app.settings.database_url else "the embedded PostgreSQL"
    console.print(
        f"[bold]tickwork demo[/] on {where}, in a schema of its own ({schema!r}, dropped "
        "when the demo ends)"
    )
    with scratch_schema(app.db, "demo", close=app.close):
        _run_and_print(app, slow_started, console)


def _run_and_print(app: App, slow_started: asyncio.Event, console: Console) -> None:
    with console.status("running a worker until every job settles..."):
        final = asyncio.run(_run(app, slow_started, console))
    table = Table(title="What happened")
    for column in ("job", "task", "state", "attempts", "result / last error", "attempt log"):
        table.add_column(column)
    for job in final:
        attempts = app.list_executions(job.id)
        log = ", ".join(f"#{e.attempt} {e.state.value}" for e in attempts) or "never ran"
        if job.result is not None:
            detail = repr(job.result)
        elif job.error is not None:
            detail = f"{job.error.type}: {job.error.message}"
        else:
            detail = ""
        table.add_row(str(job.id), job.task, job.state.value, str(job.attempts), detail, log)
    console.print(table)
    events = [e for job in final for e in app.audit_events(job.id)]
    audit = Table(title="Audit trail (transitions not already recorded by an attempt)")
    for column in ("time", "actor", "event", "job"):
        audit.add_column(column)
    for event in sorted(events, key=lambda e: e.id):
        audit.add_row(
            event.occurred_at.strftime("%H:%M:%S.%f")[:-3],
            event.actor,
            event.event_type,
            event.target_id,
        )
    console.print(audit)
