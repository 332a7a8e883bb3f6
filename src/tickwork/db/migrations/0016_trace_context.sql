-- Tracing: the W3C trace context (`traceparent`) of the span that enqueued a job, when the
-- application traces with OpenTelemetry (ops/tracing.py), so the job's run links back to
-- the request that asked for it. NULL when not tracing. Adding a nullable column rewrites
-- nothing.
ALTER TABLE {schema}.jobs ADD COLUMN trace_context text;
