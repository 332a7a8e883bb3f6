-- Statements on queues: what operators see of them, and their pause switch.

-- name: queue_stats
-- Per queue: jobs by state, the age of the oldest runnable job, and jobs that reached a final
-- state in the current minute and the ones before it back to %(window)s seconds. A queue is
-- listed while it holds jobs or has a stored pause state. Costs what the live work costs,
-- not the history: PENDING and FAILED are counted through jobs_runnable_idx (which holds
-- only them), RUNNING through the live executions (executions_one_live_idx), the final
-- states and the recent ones from the rollups (see 0015_tallies.sql: folded rows plus the
-- tallies not folded yet, read in one snapshot).
WITH unfolded AS MATERIALIZED (
    SELECT name, state, minute, delta FROM {schema}.tallies
    WHERE subject = 'job' AND state <> 'FAILED'
), since AS (
    SELECT date_trunc('minute', now()) - make_interval(secs => %(window)s - 60) AS minute
), parts AS (
    SELECT queue AS name, state, count(*) AS n,
           min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due, 0 AS recent
    FROM {schema}.jobs
    WHERE state IN ('PENDING', 'FAILED')
    GROUP BY queue, state
    UNION ALL
    SELECT j.queue, 'RUNNING', count(*), NULL, 0
    FROM {schema}.executions e
    JOIN {schema}.jobs j ON j.id = e.job_id
    WHERE e.state = 'RUNNING'
    GROUP BY j.queue
    UNION ALL
    SELECT name, state, n, NULL, 0 FROM {schema}.tally_totals WHERE subject = 'job'
    UNION ALL
    SELECT name, state, delta, NULL, 0 FROM unfolded
    UNION ALL
    SELECT name, state, 0, NULL, n FROM {schema}.tally_minutes
    WHERE subject = 'job' AND state <> 'FAILED' AND minute >= (SELECT minute FROM since)
    UNION ALL
    SELECT name, state, 0, NULL, delta FROM unfolded
    WHERE delta > 0 AND minute >= (SELECT minute FROM since)
), counts AS (
    SELECT name,
           coalesce(sum(n) FILTER (WHERE state = 'PENDING'), 0)::bigint AS pending,
           coalesce(sum(n) FILTER (WHERE state = 'RUNNING'), 0)::bigint AS running,
           coalesce(sum(n) FILTER (WHERE state = 'FAILED'), 0)::bigint AS failed,
           coalesce(sum(n) FILTER (WHERE state = 'SUCCEEDED'), 0)::bigint AS succeeded,
           coalesce(sum(n) FILTER (WHERE state = 'CANCELLED'), 0)::bigint AS cancelled,
           coalesce(sum(n) FILTER (WHERE state = 'DEAD_LETTER'), 0)::bigint AS dead_letter,
           extract(epoch FROM now() - min(oldest_due))::float8 AS oldest_pending_seconds,
           sum(recent)::bigint AS finished_recently
    FROM parts
    GROUP BY name
    HAVING sum(n) > 0
)
SELECT coalesce(c.name, q.name) AS name,
       coalesce(q.paused, false) AS paused,
       coalesce(c.pending, 0) AS pending, coalesce(c.running, 0) AS running,
       coalesce(c.failed, 0) AS failed, coalesce(c.succeeded, 0) AS succeeded,
       coalesce(c.cancelled, 0) AS cancelled, coalesce(c.dead_letter, 0) AS dead_letter,
       c.oldest_pending_seconds,
       coalesce(c.finished_recently, 0) AS finished_recently
FROM counts c
FULL JOIN {schema}.queues q ON q.name = c.name
ORDER BY 1;

-- name: queue_set_paused
-- Pause or resume a queue (workers stop or start claiming from it at their next claim), with
-- its audit event in the same statement. Resuming wakes the workers of that queue.
WITH changed AS (
    INSERT INTO {schema}.queues AS q (name, paused, updated_by)
    VALUES (%(name)s, %(paused)s, %(actor)s)
    ON CONFLICT (name) DO UPDATE
    SET paused = EXCLUDED.paused, updated_at = now(), updated_by = EXCLUDED.updated_by
    RETURNING q.*
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, CASE WHEN c.paused THEN 'queue.paused' ELSE 'queue.resumed' END,
           'queue', c.name, '{}'::jsonb
    FROM changed c
), notify AS (
    SELECT pg_notify('{schema}.jobs', c.name) FROM changed c WHERE NOT c.paused
)
SELECT c.*, (SELECT count(*) FROM notify) AS notified FROM changed c;

-- name: queue_unserved
-- Waiting jobs (PENDING, or FAILED awaiting a retry) of a (queue, task) that no live worker
-- claims: no worker seen within %(stale_after)s seconds has both the queue and the task.
-- Workers claim only tasks they have, so these jobs wait until such a worker starts. Grouped
-- first (an index-only read of jobs_runnable_idx), then matched against the few workers.
WITH waiting AS (
    SELECT queue, task, count(*) AS jobs, min(run_at) AS oldest_run_at
    FROM {schema}.jobs
    WHERE state IN ('PENDING', 'FAILED')
    GROUP BY queue, task
)
SELECT w.queue, w.task, w.jobs,
       greatest(extract(epoch FROM now() - w.oldest_run_at), 0)::float8 AS oldest_seconds
FROM waiting w
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.workers k
    WHERE k.stopped_at IS NULL
      AND k.last_seen_at >= now() - make_interval(secs => %(stale_after)s)
      AND w.queue = ANY(k.queues)
      AND w.task = ANY(k.tasks))
ORDER BY w.queue, w.task;
