"""OpenTelemetry tracing of the job path: a span around every enqueue, claim and run.

Optional: with ``opentelemetry-api`` installed (``pip install tickwork[otel]``) and a tracer
provider configured by the application (the SDK, an exporter), tickwork makes

- ``send <queue>`` (PRODUCER) around an enqueue call, whose W3C trace context is stored with
  each job it enqueues (``jobs.trace_context``, the ``traceparent`` text);
- ``receive <queues>`` (CONSUMER) around a worker's claim of a batch;
- ``process <queue>`` (CONSUMER) around each attempt, linked to the enqueuer's span (a link,
  not a parent: a run may come long after, and a batch's jobs share one sender), current
  while the handler runs, so the handler's own spans are its children; a failed attempt is
  an error status with its error's type and message.

Attributes follow OpenTelemetry's messaging conventions (``messaging.system = "tickwork"``,
``messaging.operation.type``, ``messaging.destination.name``, ``messaging.message.id``,
``messaging.batch.message_count``). Without the package, or with no provider configured,
nothing is made: each hook costs a check of one global.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the optional extra is not installed
    trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from tickwork.types import ErrorInfo, Job

SYSTEM = "tickwork"
_propagator: Any = TraceContextTextMapPropagator() if trace is not None else None
Record = Callable[[bool, "ErrorInfo | None"], None]
"""Told how an attempt ended: succeeded, and the error when it did not."""


def _tracer() -> Any:
    """The tracer, or None when nothing would record: no package, or no provider set."""
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None  # the application configured no SDK: spans would be dropped anyway
    return provider.get_tracer("tickwork")


class _Nothing:
    """The hooks when not tracing: one shared object, entered at no cost but a call."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


def sending(queue: str, count: int) -> contextlib.AbstractContextManager[str | None]:
    """Around an enqueue of ``count`` jobs (to ``queue``, the first job's): the trace
    context to store with them (None when not tracing)."""
    tracer = _tracer()
    return _NO_CONTEXT if tracer is None else _sending(tracer, queue, count)


def receiving(queues: Sequence[str]) -> contextlib.AbstractContextManager[Callable[[int], None]]:
    """Around a claim from ``queues``; gives a function told how many jobs it claimed."""
    tracer = _tracer()
    return _NO_COUNT if tracer is None else _receiving(tracer, queues)


def processing(job: Job) -> contextlib.AbstractContextManager[Record]:
    """Around one attempt of ``job``, current while its handler runs; gives the function
    told how the attempt ended."""
    tracer = _tracer()
    return _NO_OUTCOME if tracer is None else _processing(tracer, job)


@contextlib.contextmanager
def _sending(tracer: Any, queue: str, count: int) -> Iterator[str | None]:
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.destination.name": queue,
        "messaging.batch.message_count": count,
    }
    with tracer.start_as_current_span(
        f"send {queue}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ):
        carrier: dict[str, str] = {}
        _propagator.inject(carrier)
        yield carrier.get("traceparent")


@contextlib.contextmanager
def _receiving(tracer: Any, queues: Sequence[str]) -> Iterator[Callable[[int], None]]:
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "receive",
        "messaging.destination.name": ",".join(queues),
    }
    with tracer.start_as_current_span(
        f"receive {','.join(queues)}", kind=trace.SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield lambda n: span.set_attribute("messaging.batch.message_count", n)


@contextlib.contextmanager
def _processing(tracer: Any, job: Job) -> Iterator[Record]:
    links = []
    if job.trace_context:
        sender = trace.get_current_span(
            _propagator.extract({"traceparent": job.trace_context})
        ).get_span_context()
        if sender.is_valid:
            links.append(trace.Link(sender))
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "tickwork.task": job.task,
        "tickwork.attempt": job.attempts,
    }
    # a root of its own (the worker's context is no request's), linked to the sender
    with tracer.start_as_current_span(
        f"process {job.queue}",
        context=otel_context.Context(),
        kind=trace.SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    ) as span:

        def record(succeeded: bool, error: ErrorInfo | None) -> None:
            if not succeeded and error is not None:
                span.set_attribute("error.type", error.type)
                span.set_status(trace.Status(trace.StatusCode.ERROR, error.message[:500]))

        yield record


def _ignore(_: int) -> None:
    pass


def _ignore_outcome(_: bool, __: ErrorInfo | None) -> None:
    pass


_NO_CONTEXT = _Nothing(None)
_NO_COUNT = _Nothing(_ignore)
_NO_OUTCOME = _Nothing(_ignore_outcome)
