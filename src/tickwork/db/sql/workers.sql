-- The live worker registry: one row per worker process.

-- name: worker_register
-- tasks: what its executor can run, task_options: what they give their jobs (tasks
-- registered later are added by the heartbeat).
INSERT INTO {schema}.workers (id, host, pid, queues, concurrency, tasks, task_options)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(tasks)s,
        %(task_options)s::jsonb);

-- name: worker_heartbeat
UPDATE {schema}.workers
SET last_seen_at = now(), tasks = %(tasks)s, task_options = %(task_options)s::jsonb
WHERE id = %(id)s;

-- name: worker_stop
UPDATE {schema}.workers SET stopped_at = now(), last_seen_at = now() WHERE id = %(id)s;

-- name: worker_list
-- Live workers (not stopped, seen within %(stale_after)s seconds) with their attempts in flight.
SELECT w.*,
       (SELECT count(*) FROM {schema}.executions e
        WHERE e.worker_id = w.id AND e.state = 'RUNNING') AS in_flight
FROM {schema}.workers w
WHERE w.stopped_at IS NULL
  AND w.last_seen_at >= now() - make_interval(secs => %(stale_after)s)
ORDER BY w.started_at;

-- name: worker_known_tasks
-- The tasks of workers seen within %(seen_within)s seconds, stopped or not, with the options
-- the most recently seen of them gives the task's jobs: what a process without the task (an
-- API without the application) may enqueue by name, and how (a worker restarting during a
-- deploy still counts).
SELECT DISTINCT ON (t.task) t.task, w.task_options -> t.task AS options
FROM {schema}.workers w, unnest(w.tasks) AS t(task)
WHERE w.last_seen_at >= now() - make_interval(secs => %(seen_within)s)
ORDER BY t.task, w.last_seen_at DESC;

-- name: worker_metrics_record
INSERT INTO {schema}.worker_metrics
    (worker_id, host, pid, roles, cpu_percent, rss_bytes, children_rss_bytes)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(roles)s, %(cpu_percent)s, %(rss_bytes)s,
        %(children_rss_bytes)s);

-- name: worker_metrics_list
-- Samples, newest first, of one worker or all, in a time range, before a cursor.
SELECT * FROM {schema}.worker_metrics
WHERE (%(worker_id)s::uuid IS NULL OR worker_id = %(worker_id)s)
  AND (%(start)s::timestamptz IS NULL OR sampled_at >= %(start)s)
  AND (%(end)s::timestamptz IS NULL OR sampled_at < %(end)s)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: worker_metrics_prune
-- Samples older than the window (seconds), a batch at a time.
DELETE FROM {schema}.worker_metrics
WHERE id IN (
    SELECT id FROM {schema}.worker_metrics
    WHERE sampled_at < now() - make_interval(secs => %(older_than)s)
    LIMIT %(limit)s
)
RETURNING 1;

-- name: worker_prune
-- Records of workers not seen for the window (seconds; stopped, or killed without a stop),
-- a batch at a time: the registry stays the size of the fleet, not of every start.
DELETE FROM {schema}.workers
WHERE id IN (
    SELECT id FROM {schema}.workers
    WHERE last_seen_at < now() - make_interval(secs => %(older_than)s)
    LIMIT %(limit)s
)
RETURNING id;
