-- Statements on the executions table (one row per attempt; the row carries the lease).

-- name: execution_renew_leases
-- Extend the leases of a worker's in-flight attempts, one statement per interval. The answer
-- has a row per attempt still RUNNING: renewed, or busy (locked by another statement right
-- now, so neither renewed nor known lost; the next renewal decides). An id missing from the
-- answer has lost its lease (reclaimed or released): the worker stops treating it as live.
-- The job is read, not locked, to report cancel requests.
-- SKIP LOCKED, not a wait: a locked row is being completed by this worker (whose outcome
-- write needs no lease) or reclaimed by the watchdog; waiting could deadlock with the
-- completion, which locks the same rows in another order.
WITH live AS (
    SELECT job_id, id
    FROM {schema}.executions
    WHERE job_id = ANY(%(job_ids)s::bigint[])  -- the primary key's leading column
      AND id = ANY(%(execution_ids)s::bigint[])
      AND state = 'RUNNING'  -- fencing: never revive a reclaimed attempt
    FOR NO KEY UPDATE SKIP LOCKED  -- the lock the UPDATE below takes anyway
), renewed AS (
    UPDATE {schema}.executions e
    SET lease_expires_at = now() + make_interval(secs => %(lease_ttl)s)
    FROM live l, {schema}.jobs j
    WHERE e.job_id = l.job_id AND e.id = l.id
      AND j.id = e.job_id
    RETURNING e.id, (j.cancel_requested_at IS NOT NULL) AS cancel_requested
)
SELECT id, cancel_requested, true AS renewed FROM renewed
UNION ALL
SELECT e.id, false, false
FROM {schema}.executions e
WHERE e.job_id = ANY(%(job_ids)s::bigint[])
  AND e.id = ANY(%(execution_ids)s::bigint[])
  AND e.state = 'RUNNING'
  AND e.id <> ALL(ARRAY(SELECT id FROM live));  -- RUNNING but locked: busy

-- name: execution_reclaim_expired
-- The watchdog: attempts whose lease expired become TIMED_OUT and their jobs go back to
-- PENDING (or DEAD_LETTER when attempts are exhausted, CANCELLED when a cancel was
-- requested). SKIP LOCKED: an execution being completed right now is left to its worker.
-- Execution locked first, then the job.
WITH expired AS (
    SELECT id, job_id
    FROM {schema}.executions
    WHERE state = 'RUNNING' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), timed_out AS (
    UPDATE {schema}.executions e
    SET state = 'TIMED_OUT', finished_at = now(),
        error = jsonb_build_object(
            'type', 'tickwork.LeaseExpired',
            'message', 'lease expired at ' || e.lease_expires_at || ' without renewal',
            'traceback', '')
    FROM expired x
    WHERE e.job_id = x.job_id AND e.id = x.id AND e.state = 'RUNNING'
    RETURNING e.id, e.job_id, e.worker_id
), reclaimed AS (
    UPDATE {schema}.jobs j
    SET state = CASE
            WHEN j.cancel_requested_at IS NOT NULL THEN 'CANCELLED'
            WHEN j.attempts >= j.max_attempts THEN 'DEAD_LETTER'
            ELSE 'PENDING'
        END,
        run_at = now(),
        finished_at = CASE
            WHEN j.cancel_requested_at IS NOT NULL OR j.attempts >= j.max_attempts THEN now()
        END
    FROM timed_out t
    WHERE j.id = t.job_id
      -- by primary key, never a join scan, and in id order as job_cancel locks jobs (joined
      -- in the order of the expired leases, a bulk cancel could deadlock with the watchdog;
      -- a near-empty table is read in physical order: see job_complete_many)
      AND j.id = ANY(ARRAY(SELECT job_id FROM timed_out))
      AND j.state = 'RUNNING'
    RETURNING j.id, j.state, j.queue, t.id AS execution_id, t.worker_id
), tally AS (  -- the rollups (see 0015_tallies.sql): one row per queue and state reached
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', r.queue, r.state, date_trunc('minute', now()), count(*)
    FROM reclaimed r
    WHERE r.state IN ('CANCELLED', 'DEAD_LETTER')
    GROUP BY r.queue, r.state
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'job.reclaimed', 'job', r.id::text,
           jsonb_build_object('execution_id', r.execution_id, 'worker_id', r.worker_id,
                              'to', r.state)
    FROM reclaimed r
    UNION ALL
    SELECT %(actor)s,
           CASE r.state WHEN 'CANCELLED' THEN 'job.cancelled' ELSE 'job.dead_lettered' END,
           'job', r.id::text, jsonb_build_object('execution_id', r.execution_id)
    FROM reclaimed r
    WHERE r.state IN ('CANCELLED', 'DEAD_LETTER')
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM reclaimed WHERE state = 'PENDING') AS q
    UNION ALL  -- app.wait(): jobs this made final ('' when the ids would not fit a payload)
    SELECT pg_notify('{schema}.finished', CASE WHEN length(ids) <= 7000 THEN ids ELSE '' END)
    FROM (SELECT string_agg(id::text, ',') AS ids FROM reclaimed
          WHERE state IN ('CANCELLED', 'DEAD_LETTER')) AS e
    WHERE ids IS NOT NULL
)
SELECT r.id AS job_id, r.execution_id, r.state, (SELECT count(*) FROM notify) AS notified
FROM reclaimed r;

-- name: execution_release_many
-- Graceful shutdown: hand unfinished attempts back. The released attempt does not count
-- against max_attempts; a job whose cancel was requested is cancelled instead.
WITH released AS (
    UPDATE {schema}.executions e
    SET state = 'RELEASED', finished_at = now()
    WHERE e.job_id = ANY(%(job_ids)s::bigint[])  -- the primary key's leading column
      AND e.id = ANY(%(execution_ids)s::bigint[])
      AND e.state = 'RUNNING'  -- fencing
    RETURNING e.id, e.job_id, e.worker_id
), returned AS (
    UPDATE {schema}.jobs j
    SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'CANCELLED' ELSE 'PENDING' END,
        attempts = j.attempts - 1,
        run_at = now(),
        finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL THEN now() END
    FROM released r
    WHERE j.id = r.job_id
      AND j.id = ANY(ARRAY(SELECT job_id FROM released))  -- by primary key, never a join scan
      AND j.state = 'RUNNING'
    RETURNING j.id, j.state, j.queue, r.id AS execution_id, r.worker_id
), tally AS (  -- the rollups (see 0015_tallies.sql): one row per queue and state reached
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', r.queue, r.state, date_trunc('minute', now()), count(*)
    FROM returned r
    WHERE r.state = 'CANCELLED'
    GROUP BY r.queue, r.state
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT 'worker:' || r.worker_id,
           CASE r.state WHEN 'CANCELLED' THEN 'job.cancelled' ELSE 'job.released' END,
           'job', r.id::text, jsonb_build_object('execution_id', r.execution_id)
    FROM returned r
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM returned WHERE state = 'PENDING') AS q
    UNION ALL  -- app.wait(): jobs whose cancel this honoured are final
    SELECT pg_notify('{schema}.finished', CASE WHEN length(ids) <= 7000 THEN ids ELSE '' END)
    FROM (SELECT string_agg(id::text, ',') AS ids FROM returned WHERE state = 'CANCELLED') AS e
    WHERE ids IS NOT NULL
)
SELECT r.id AS job_id, r.execution_id, r.state, (SELECT count(*) FROM notify) AS notified
FROM returned r;

-- name: execution_list_for_job
SELECT * FROM {schema}.executions WHERE job_id = %(job_id)s ORDER BY id;

-- name: execution_live_signature
-- What tells whether the live attempts changed since the last look: how many there are and
-- the sum and largest of their ids (a claim adds an id; the job path sends no NOTIFY for
-- one). Reads only the live-attempt index's rows: at most the workers' total concurrency.
SELECT count(*) AS n, coalesce(max(id), 0) AS top, coalesce(sum(id), 0)::text AS total
FROM {schema}.executions
WHERE state = 'RUNNING';
