-- `tickwork bench` runs only in a schema it made for itself: it empties its tables between
-- workloads and drops the schema when the run ends, so it must never be handed a schema that
-- holds anything else. The schema it makes carries the comment below as its mark; a schema
-- without it is refused.

-- name: bench_lock
-- One bench per schema at a time: a second run would empty and drop the first one's tables.
-- Session-level: held until the bench's own connection closes, however the run ends.
SELECT pg_try_advisory_lock(hashtext('tickwork.bench.' || %(schema)s)) AS locked;

-- name: bench_schema_owner
-- No row: no such schema. `ours`: it carries the mark of bench_schema_create (the same
-- text in both blocks), so a bench made it.
SELECT obj_description(oid, 'pg_namespace')
           IS NOT DISTINCT FROM 'made by tickwork bench for one run; dropped when the run ends'
           AS ours
  FROM pg_namespace
 WHERE nspname = %(schema)s;

-- name: bench_schema_create
-- No IF NOT EXISTS: a schema someone else made in the meantime fails this run instead of
-- being taken over. Run in one transaction with its mark, so the schema never exists
-- unmarked.
CREATE SCHEMA {schema};

-- name: bench_schema_mark
COMMENT ON SCHEMA {schema} IS 'made by tickwork bench for one run; dropped when the run ends';

-- name: bench_schema_drop
-- Only run on a schema bench_schema_owner found marked, or that this run made.
DROP SCHEMA IF EXISTS {schema} CASCADE;

-- name: bench_truncate
-- Between workloads, only after bench_schema_owner found the schema marked.
TRUNCATE {schema}.audit_events, {schema}.executions, {schema}.jobs, {schema}.workers
    RESTART IDENTITY CASCADE;
