-- Scratch schemas: `tickwork bench` and `tickwork demo` each run in a schema they make for
-- one run, empty and drop (db/scratch.py), so they must never be handed a schema that holds
-- anything else. The schema they make carries the comment below as its mark; a schema
-- without it is refused and left untouched.

-- name: scratch_lock
-- One run per scratch schema at a time: a second would empty and drop the first one's
-- tables. Session-level: held until the run's own connection closes, however the run ends.
SELECT pg_try_advisory_lock(hashtext('tickwork.scratch.' || %(schema)s)) AS locked;

-- name: scratch_owner
-- No row: no such schema. `ours`: it carries the mark of scratch_mark (the same text in both
-- blocks), so a scratch run made it.
SELECT obj_description(oid, 'pg_namespace')
           IS NOT DISTINCT FROM 'made by tickwork for one run; dropped when the run ends'
           AS ours
  FROM pg_namespace
 WHERE nspname = %(schema)s;

-- name: scratch_create
-- No IF NOT EXISTS: a schema someone else made in the meantime fails this run instead of
-- being taken over. Run in one transaction with its mark, so the schema never exists
-- unmarked.
CREATE SCHEMA {schema};

-- name: scratch_mark
COMMENT ON SCHEMA {schema} IS 'made by tickwork for one run; dropped when the run ends';

-- name: scratch_drop
-- Only run on a schema scratch_owner found marked, or that this run made.
DROP SCHEMA IF EXISTS {schema} CASCADE;

-- name: scratch_truncate
-- Between bench workloads, only after scratch_owner found the schema marked.
TRUNCATE {schema}.audit_events, {schema}.executions, {schema}.jobs, {schema}.workers,
    {schema}.tallies, {schema}.tally_totals, {schema}.tally_minutes
    RESTART IDENTITY CASCADE;

-- name: scratch_empty
-- Every table of a scratch schema emptied but the migrations' record (the testing plugin's
-- tickwork_clean, on the schema it made for the test session).
DO $$
DECLARE
    tables text;
BEGIN
    SELECT string_agg(format('%%I.%%I', schemaname, tablename), ', ') INTO tables
      FROM pg_tables
     WHERE schemaname = '{schema}' AND tablename <> 'migrations';
    IF tables IS NOT NULL THEN
        EXECUTE 'TRUNCATE ' || tables || ' RESTART IDENTITY CASCADE';
    END IF;
END
$$;
