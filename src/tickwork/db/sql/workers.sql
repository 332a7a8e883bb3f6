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
