"""OpenTelemetry tracing with the SDK's in-memory exporter: a request's span is the parent of
the enqueue's ``send`` span, whose trace context is stored with the job; the worker's
``process`` span links to it, is the parent of what the handler traces, and carries a
failure as an error; a claim is a ``receive`` span. Without a configured provider nothing is
made and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tickwork import App, JobSpec, JobState

trace = pytest.importorskip("opentelemetry.trace", reason="pip install tickwork[otel]")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.util._once import Once  # noqa: E402


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A tracer provider exporting to memory, set for the test and taken away after it (the
    API allows one global provider per process: its test reset, as OpenTelemetry's own
    tests do)."""
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


def named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_request_links_to_the_run_of_the_job_it_enqueued(
    app: App, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("the application")

    @app.task(queue="mail")
    def send_receipt(order_id: int) -> str:
        with tracer.start_as_current_span("render the receipt"):
            return f"receipt {order_id}"

    with tracer.start_as_current_span("POST /orders", kind=trace.SpanKind.SERVER) as request:
        job = await send_receipt.defer_async(order_id=7)
    async with app.worker(queues=["mail"]) as worker:
        assert len((await worker.run_once()).outcomes) == 1

    [send] = named(spans, "send mail")
    assert send.kind is trace.SpanKind.PRODUCER
    assert send.parent.span_id == request.get_span_context().span_id
    assert send.attributes["messaging.system"] == "tickwork"
    assert send.attributes["messaging.destination.name"] == "mail"
    assert send.attributes["messaging.batch.message_count"] == 1
    stored = (await app.get_job_async(job.id)).trace_context
    assert stored is not None and f"{send.context.span_id:016x}" in stored

    [receive] = named(spans, "receive mail")
    assert receive.kind is trace.SpanKind.CONSUMER
    assert receive.attributes["messaging.batch.message_count"] == 1

    [process] = named(spans, "process mail")
    assert process.kind is trace.SpanKind.CONSUMER and process.parent is None
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.attributes["messaging.message.id"] == str(job.id)
    assert process.attributes["tickwork.task"] == send_receipt.name
    assert process.status.status_code is trace.StatusCode.UNSET

    [render] = named(spans, "render the receipt")  # the handler's own, inside the run
    assert render.parent.span_id == process.context.span_id


async def test_a_failed_attempt_is_an_error_span(app: App, spans: InMemorySpanExporter) -> None:
    @app.task(queue="fragile", max_attempts=1)
    def fragile() -> None:
        raise ValueError("no such customer")

    job = fragile.defer()
    async with app.worker(queues=["fragile"]) as worker:
        await worker.run_once()
    assert (await app.get_job_async(job.id)).state is JobState.DEAD_LETTER
    [process] = named(spans, "process fragile")
    assert process.status.status_code is trace.StatusCode.ERROR
    assert process.status.description == "no such customer"
    assert process.attributes["error.type"] == "ValueError"


async def test_without_a_provider_nothing_is_traced_or_stored(app: App) -> None:
    @app.task(queue="plain")
    def plain() -> None:
        pass

    job = plain.defer()
    assert job.trace_context is None
    assert (await app.get_job_async(job.id)).trace_context is None


async def test_a_fastapi_request_instrumented_by_opentelemetry_links_to_the_jobs_run(
    app: App, spans: InMemorySpanExporter
) -> None:
    """The whole way a user sees it: FastAPI instrumented by OpenTelemetry's own
    instrumentation, a handler enqueueing in its request's transaction
    (``tickwork.contrib.fastapi``), a worker running the job."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.fastapi")
    import httpx
    from fastapi import FastAPI

    from tickwork.contrib.fastapi import lifespan, transaction

    @app.task(queue="receipts")
    def send_receipt(order_id: int) -> None:
        pass

    api = FastAPI(lifespan=lifespan(app))

    # (this module's annotations are strings: the dependency is given as a default instead)
    in_transaction = transaction(app)

    async def place(order_id: int, tx: Any = in_transaction) -> dict[str, int]:
        job = await send_receipt.defer_async(conn=tx, order_id=order_id)
        return {"job": job.id}

    api.post("/orders/{order_id}")(place)
    instrumentation.FastAPIInstrumentor.instrument_app(api)
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://t") as client,
    ):
        placed = await client.post("/orders/7")
    assert placed.status_code == 200, placed.text
    async with app.worker(queues=["receipts"]) as worker:
        assert len((await worker.run_once()).outcomes) == 1

    [request] = [s for s in spans.get_finished_spans() if s.kind is trace.SpanKind.SERVER]
    assert request.name == "POST /orders/{order_id}"
    [send] = named(spans, "send receipts")
    assert send.context.trace_id == request.context.trace_id  # the request's trace
    assert send.parent.span_id == request.context.span_id
    [process] = named(spans, "process receipts")
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.attributes["messaging.message.id"] == str(placed.json()["job"])


async def test_every_job_of_a_batch_carries_the_senders_trace_context(
    app: App, spans: InMemorySpanExporter
) -> None:
    @app.task(queue="bulk")
    def ping(n: int) -> None:
        pass

    @app.task(queue="bulk")
    def pong(n: int) -> None:
        pass

    # one task's plain jobs share a row; a second task's, another: each is traced
    specs = [ping.spec(n=n) for n in range(3)] + [pong.spec(n=9)]
    jobs = await app.enqueue_many_async(specs)
    [send] = named(spans, "send bulk")
    assert send.attributes["messaging.batch.message_count"] == 4
    for job in jobs:
        stored = (await app.get_job_async(job.id)).trace_context
        assert stored is not None and f"{send.context.span_id:016x}" in stored
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # no provider from here on
    trace._TRACER_PROVIDER = None
    untraced = await app.enqueue_many_async([ping.spec(n=1), ping.spec(n=2)])
    for job in untraced:  # the task's shared row kept no trace of the traced batch
        assert (await app.get_job_async(job.id)).trace_context is None


async def test_the_jobs_an_enqueue_returns_carry_the_trace_context_stored_with_them(
    app: App, spans: InMemorySpanExporter
) -> None:
    @app.task(queue="bulk")
    def ping(n: int) -> None:
        pass

    one = await app.enqueue_async(ping.name, {"n": 0})
    shared = await app.enqueue_many_async([ping.spec(n=n) for n in range(3)])
    mixed = await app.enqueue_many_async([ping.spec(n=4), JobSpec(ping.name, {"n": 5}, priority=3)])
    keyed = JobSpec(ping.name, {"n": 6}, unique_key="k")
    [new, again] = await app.enqueue_many_async([keyed, keyed])  # the repeat: a duplicate
    for job in [one, *shared, *mixed, new, again]:
        assert job.trace_context is not None
        assert job.trace_context == (await app.get_job_async(job.id)).trace_context
