-- What a running handler last reported of its progress (ctx.progress): {"current", "total",
-- "message", "attempt", "at"}. Written in batches by the worker while the attempt is live,
-- kept after the job finishes (how far a failed attempt got).
ALTER TABLE {schema}.jobs ADD COLUMN progress jsonb;
