-- Statements on definitions (operator-stored HTTP and script jobs) and their schedules.

-- name: definition_create
-- A new definition, with its audit event; a name already taken answers no row.
WITH stored AS (
    INSERT INTO {schema}.definitions
        (name, description, kind, spec, queue, cron, timezone, exec_timeout, max_attempts,
         backoff, loop, enabled, created_by, updated_by)
    VALUES (%(name)s, %(description)s, %(kind)s, %(spec)s::jsonb, %(queue)s, %(cron)s,
            %(timezone)s, %(exec_timeout)s, %(max_attempts)s, %(backoff)s::jsonb,
            %(loop)s::jsonb, %(enabled)s, %(actor)s, %(actor)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'definition.created', 'definition', s.id::text,
           jsonb_build_object('name', s.name, 'kind', s.kind)
    FROM stored s
)
SELECT * FROM stored;

-- name: definition_get
SELECT * FROM {schema}.definitions WHERE id = %(id)s;

-- name: definition_get_locked
-- The definition, locked against a concurrent edit until the transaction ends (an edit
-- reads, merges and writes under it; a run-now takes its snapshot under it).
SELECT * FROM {schema}.definitions WHERE id = %(id)s FOR UPDATE;

-- name: definition_lock_shared
-- The definitions %(ids)s, held FOR SHARE until the transaction ends: a retry of their runs
-- puts their current fields over the runs' snapshots, and an edit or a delete (FOR UPDATE,
-- DELETE) waits for it to commit, so no retry runs a version replaced or removed meanwhile.
-- In id order, like every lock of several definitions. Rows of those that exist.
SELECT * FROM {schema}.definitions
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id
FOR SHARE;

-- name: definition_runs_retryable
-- Of the jobs %(job_ids)s, the runs of definitions (tasks %(tasks)s) a retry may send back
-- (DEAD_LETTER or FAILED, as job_retry): the job, its queue, and the definition's id and
-- version its snapshot names (NULL when the arguments hold no such number: such a run is
-- never retried). Read without a lock: job_retry decides on the locked row.
SELECT j.id AS job_id,
       j.queue,
       CASE WHEN (j.args -> 'definition' ->> 'id') ~ '^[0-9]{1,18}$'
            THEN ((j.args -> 'definition' ->> 'id'))::bigint END AS definition_id,
       CASE WHEN (j.args -> 'definition' ->> 'version') ~ '^[0-9]{1,9}$'
            THEN ((j.args -> 'definition' ->> 'version'))::int END AS version
FROM {schema}.jobs j
WHERE j.id = ANY(%(job_ids)s::bigint[])
  AND j.task = ANY(%(tasks)s::text[])
  AND j.state IN ('DEAD_LETTER', 'FAILED');

-- name: definition_find
SELECT id FROM {schema}.definitions WHERE name = %(name)s;

-- name: definition_list
-- A page of definitions by id, filtered: kind, enabled, and a case-insensitive part of the
-- name (%(name_like)s is already a LIKE pattern with its wildcards escaped).
SELECT * FROM {schema}.definitions
WHERE (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(enabled)s::boolean IS NULL OR enabled = %(enabled)s)
  AND (%(name_like)s::text IS NULL OR name ILIKE %(name_like)s)
  AND id > %(after)s
ORDER BY id
LIMIT %(limit)s;

-- name: definition_update
-- Write an edit (every field, as merged under definition_get_locked), one version on, with
-- its audit event naming the fields changed (never their values: a header may be a secret).
WITH stored AS (
    UPDATE {schema}.definitions
    SET name = %(name)s, description = %(description)s, spec = %(spec)s::jsonb,
        queue = %(queue)s, cron = %(cron)s, timezone = %(timezone)s,
        exec_timeout = %(exec_timeout)s, max_attempts = %(max_attempts)s,
        backoff = %(backoff)s::jsonb, loop = %(loop)s::jsonb, enabled = %(enabled)s,
        version = version + 1, updated_by = %(actor)s, updated_at = now()
    WHERE id = %(id)s
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, %(event)s, 'definition', s.id::text,
           jsonb_build_object('name', s.name, 'version', s.version,
                              'fields', %(changed)s::jsonb)
    FROM stored s
)
SELECT * FROM stored;

-- name: definition_delete
-- Delete a definition and its schedule; its jobs stay, as history.
WITH gone AS (
    DELETE FROM {schema}.definitions WHERE id = %(id)s RETURNING id, name
), unscheduled AS (
    DELETE FROM {schema}.schedules s
    USING gone g
    WHERE s.name = 'definition:' || g.id AND s.origin = 'definition'
), activity AS (
    DELETE FROM {schema}.definition_activity a USING gone g WHERE a.definition_id = g.id
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'definition.deleted', 'definition', g.id::text,
           jsonb_build_object('name', g.name)
    FROM gone g
)
SELECT id, name FROM gone;

-- name: definition_schedule_put
-- The definition's schedule row: what the scheduler fires (the task, the snapshot as its
-- arguments, the runtime's queue, attempts and the job timeout). Its next fire time is kept
-- unless the cron or time zone changed or it is enabled again (then the first after now,
-- computed by the caller): an edit never fires a run twice or skips one.
-- NOTIFY: wake the scheduler, which sleeps until the earliest next_run_at it knew.
WITH written AS (
    INSERT INTO {schema}.schedules AS s
        (name, task, args, cron, timezone, enabled, next_run_at, origin, task_queue,
         task_priority, task_max_attempts, task_timeout)
    VALUES (%(name)s, %(task)s, %(args)s::jsonb, %(cron)s, %(timezone)s, %(enabled)s,
            %(next_run_at)s, 'definition', %(queue)s, %(priority)s, %(max_attempts)s, %(timeout)s)
    ON CONFLICT (name) DO UPDATE
    SET task = EXCLUDED.task, args = EXCLUDED.args,
        next_run_at = CASE
            WHEN (s.cron, s.timezone) IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone)
              OR (EXCLUDED.enabled AND NOT s.enabled)
            THEN EXCLUDED.next_run_at ELSE s.next_run_at END,
        cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, enabled = EXCLUDED.enabled,
        task_queue = EXCLUDED.task_queue, task_priority = EXCLUDED.task_priority,
        task_max_attempts = EXCLUDED.task_max_attempts,
        task_timeout = EXCLUDED.task_timeout, updated_at = now()
    WHERE s.origin = 'definition'
    RETURNING s.name
), notify AS (
    SELECT pg_notify('{schema}.schedules', w.name) FROM written w
)
SELECT count(*) AS notified FROM notify;

-- name: definition_schedule_drop
-- A definition whose cron was removed has no schedule row.
DELETE FROM {schema}.schedules WHERE name = %(name)s AND origin = 'definition';

-- name: definition_run_audit
-- An operator's run-now, or a webhook's, recorded against the definition with the job made.
INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
VALUES (%(actor)s, %(event)s, 'definition', %(id)s::text,
        jsonb_build_object('job_id', %(job_id)s::bigint, 'version', %(version)s::integer));

-- name: definition_webhook_set
-- Give the definition a webhook token (its hash), replacing any before, or remove it (NULL),
-- with its audit event.
WITH stored AS (
    UPDATE {schema}.definitions
    SET webhook_hash = %(hash)s, updated_by = %(actor)s, updated_at = now()
    WHERE id = %(id)s
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, %(event)s, 'definition', s.id::text, jsonb_build_object('name', s.name)
    FROM stored s
)
SELECT * FROM stored;

-- name: definition_activity_record
-- One attempt of a run ended: count it in its minute of the database clock, and in the
-- definition's own counters and last run (none when the definition was deleted meanwhile).
WITH counted AS (
    UPDATE {schema}.definitions
    SET runs = runs + 1, failures = failures + (1 - %(succeeded)s::int),
        last_run_at = now(),
        last_outcome = CASE WHEN %(succeeded)s THEN 'succeeded' ELSE 'failed' END
    WHERE id = %(id)s
    RETURNING id
)
INSERT INTO {schema}.definition_activity AS a
    (definition_id, bucket, runs, succeeded, failed, duration_total, duration_max)
SELECT id, date_trunc('minute', now()), 1, %(succeeded)s::int, 1 - %(succeeded)s::int,
       %(duration)s, %(duration)s
FROM counted
ON CONFLICT (definition_id, bucket) DO UPDATE
SET runs = a.runs + 1,
    succeeded = a.succeeded + EXCLUDED.succeeded,
    failed = a.failed + EXCLUDED.failed,
    duration_total = a.duration_total + EXCLUDED.duration_total,
    duration_max = greatest(a.duration_max, EXCLUDED.duration_max);

-- name: definition_activity_list
-- A definition's activity from %(start)s (inclusive) to %(end)s (exclusive), summed into
-- buckets of %(step)s seconds.
SELECT date_bin(make_interval(secs => %(step)s), bucket, TIMESTAMPTZ '2000-01-01 00:00:00+00')
           AS at,
       sum(runs)::bigint AS runs, sum(succeeded)::bigint AS succeeded,
       sum(failed)::bigint AS failed, sum(duration_total) AS duration_total,
       max(duration_max) AS duration_max
FROM {schema}.definition_activity
WHERE definition_id = %(id)s AND bucket >= %(start)s AND bucket < %(end)s
GROUP BY 1
ORDER BY 1;

-- name: definition_activity_prune
-- Activity buckets older than the window (seconds), a batch at a time.
DELETE FROM {schema}.definition_activity
WHERE (definition_id, bucket) IN (
    SELECT definition_id, bucket FROM {schema}.definition_activity
    WHERE bucket < now() - make_interval(secs => %(older_than)s)
    LIMIT %(limit)s
)
RETURNING 1;
