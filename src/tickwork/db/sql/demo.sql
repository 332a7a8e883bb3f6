-- `tickwork demo` runs in a schema of its own (the configured schema's name + "_demo"), made
-- afresh for each run and dropped after it, so a `serve` or worker on the configured schema
-- never sees its schedule or jobs, and it never needs to win one of their leases.

-- name: demo_lock
-- One demo per schema at a time: a second run would drop the first one's schema under it.
-- Session-level: held until the demo's own connection closes, however the demo ends.
SELECT pg_try_advisory_lock(hashtext('tickwork.demo.' || %(schema)s)) AS locked;

-- name: demo_drop_schema
-- Only ever run with the demo's own statements (its schema ends in "_demo"): before a run,
-- whatever a run killed before it could clean up left; after it, everything the run made.
DROP SCHEMA IF EXISTS {schema} CASCADE;
