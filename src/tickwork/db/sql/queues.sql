-- Statements on queues: what operators see of them, and their pause switch.

-- name: queue_stats
-- Per queue: jobs by state, the age of the oldest runnable job, and jobs finished in the last
-- %(window)s seconds. A queue is listed while it holds jobs or has a stored pause state.
WITH counts AS (
    SELECT queue,
           count(*) FILTER (WHERE state = 'PENDING') AS pending,
           count(*) FILTER (WHERE state = 'RUNNING') AS running,
           count(*) FILTER (WHERE state = 'FAILED') AS failed,
           count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,
           count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,
           count(*) FILTER (WHERE state = 'DEAD_LETTER') AS dead_letter,
           extract(epoch FROM now() - min(run_at) FILTER (
               WHERE state IN ('PENDING', 'FAILED') AND run_at <= now())) AS oldest_pending_seconds,
           count(*) FILTER (
               WHERE finished_at >= now() - make_interval(secs => %(window)s)) AS finished_recently
    FROM {schema}.jobs
    GROUP BY queue
)
SELECT coalesce(c.queue, q.name) AS name,
       coalesce(q.paused, false) AS paused,
       coalesce(c.pending, 0) AS pending, coalesce(c.running, 0) AS running,
       coalesce(c.failed, 0) AS failed, coalesce(c.succeeded, 0) AS succeeded,
       coalesce(c.cancelled, 0) AS cancelled, coalesce(c.dead_letter, 0) AS dead_letter,
       c.oldest_pending_seconds,
       coalesce(c.finished_recently, 0) AS finished_recently
FROM counts c
FULL JOIN {schema}.queues q ON q.name = c.queue
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
