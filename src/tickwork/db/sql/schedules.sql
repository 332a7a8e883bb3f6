-- Statements on the schedules table and the jobs they materialise.

-- name: schedule_upsert
-- Code-defined schedules are written at start-up, by name: a definition that did not change
-- keeps its next_run_at (nothing is lost or fired twice across a restart); a changed cron or
-- time zone takes the next_run_at computed for it. Pause state is the operator's, kept.
-- task_*: what the jobs take from the task's registration, for a lease holder without it.
-- defined_by: the defining worker joins the live workers already recorded; ids of workers
-- stopped or not seen for %(stale_after)s seconds are dropped (see schedule_delete).
-- NOTIFY: the scheduler sleeps until the earliest next_run_at it knew; wake it to look again.
WITH written AS (
    INSERT INTO {schema}.schedules AS s
        (name, task, args, cron, timezone, queue, priority, misfire, misfire_limit, overlap,
         next_run_at, origin, task_queue, task_priority, task_max_attempts, task_timeout,
         defined_by)
    VALUES (%(name)s, %(task)s, %(args)s::jsonb, %(cron)s, %(timezone)s, %(queue)s, %(priority)s,
            %(misfire)s, %(misfire_limit)s, %(overlap)s, %(next_run_at)s, %(origin)s,
            %(task_queue)s, %(task_priority)s, %(task_max_attempts)s, %(task_timeout)s,
            %(defined_by)s::uuid[])
    ON CONFLICT (name) DO UPDATE
    SET task = EXCLUDED.task, args = EXCLUDED.args, queue = EXCLUDED.queue,
        priority = EXCLUDED.priority, misfire = EXCLUDED.misfire,
        misfire_limit = EXCLUDED.misfire_limit, overlap = EXCLUDED.overlap,
        next_run_at = CASE
            WHEN (s.cron, s.timezone) IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone)
            THEN EXCLUDED.next_run_at ELSE s.next_run_at END,
        cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
        task_queue = EXCLUDED.task_queue, task_priority = EXCLUDED.task_priority,
        task_max_attempts = EXCLUDED.task_max_attempts, task_timeout = EXCLUDED.task_timeout,
        defined_by = ARRAY(
            SELECT DISTINCT d FROM unnest(s.defined_by || EXCLUDED.defined_by) AS d
            WHERE d = ANY(EXCLUDED.defined_by) OR EXISTS (
                SELECT 1 FROM {schema}.workers w
                WHERE w.id = d AND w.stopped_at IS NULL
                  AND w.last_seen_at >= now() - make_interval(secs => %(stale_after)s))),
        updated_at = now()
    RETURNING *
), notify AS (
    SELECT pg_notify('{schema}.schedules', w.name) FROM written w
)
SELECT *, (SELECT count(*) FROM notify) AS notified FROM written;

-- name: schedule_retarget
-- Operator-stored schedules of the tasks a starting process registers take the tasks'
-- current registration (a task moved to another queue in code takes its schedules' jobs
-- along). Rows already up to date are not rewritten.
UPDATE {schema}.schedules s
SET task_queue = t.queue, task_priority = t.priority, task_max_attempts = t.max_attempts,
    task_timeout = t.timeout, updated_at = now()
FROM unnest(%(tasks)s::text[], %(queues)s::text[], %(priorities)s::smallint[],
            %(max_attempts)s::integer[], %(timeouts)s::double precision[])
     AS t(task, queue, priority, max_attempts, timeout)
WHERE s.task = t.task AND s.origin = 'api'
  AND (s.task_queue, s.task_priority, s.task_max_attempts, s.task_timeout)
      IS DISTINCT FROM (t.queue, t.priority, t.max_attempts, t.timeout);

-- name: schedule_now
SELECT now() AS now;

-- name: schedule_next_due
-- When the scheduler's next pass is due: the earliest next fire time of the schedules it
-- would fire, and the database's clock to measure the wait against (the scheduler sleeps
-- until then, bounded by its tick). Schedules whose stored definition does not parse are
-- left out (%(invalid)s): they stay due without ever firing.
SELECT min(next_run_at) AS next_run_at, clock_timestamp() AS db_now
FROM {schema}.schedules
WHERE enabled AND NOT paused AND id <> ALL(%(invalid)s::bigint[]);

-- name: schedule_due_lock
-- Due schedules, locked for this tick; SKIP LOCKED: another scheduler's tick takes the rest.
-- FOR UPDATE re-checks next_run_at on the latest row version, so a schedule another tick
-- just advanced is not due any more. %(holder)s (the lease holder's id; NULL for a pass made
-- outside the lease, as tests and `tickwork schedules` do) must hold the SCHEDULER lease on
-- the database's clock at this transaction's start, which is also its jobs' created_at: a
-- holder whose pass reaches the server late (a partition healed, its packets retransmitted)
-- finds nothing due, and no job of it is created after its lease ended.
SELECT *, now() AS db_now
FROM {schema}.schedules
WHERE enabled AND NOT paused AND next_run_at <= now()
  AND (%(holder)s::text IS NULL OR EXISTS (
      SELECT 1 FROM {schema}.leases l
      WHERE l.name = 'SCHEDULER' AND l.holder = %(holder)s::text
        AND l.expires_at > now()  -- fencing: a lapsed holder fires nothing
  ))
ORDER BY next_run_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: schedule_active_job
-- Overlap check: is a job of this schedule still pending, awaiting retry or running?
SELECT EXISTS (
    SELECT 1 FROM {schema}.jobs
    WHERE schedule_id = %(schedule_id)s AND state IN ('PENDING', 'FAILED', 'RUNNING')
) AS active;

-- name: schedule_fire
-- One job per (schedule, fire time), whatever happens: a retried tick, a second scheduler,
-- a failover. Returns nothing when that fire time already has its job.
WITH inserted AS (
    INSERT INTO {schema}.jobs
        (queue, task, args, priority, max_attempts, timeout, created_by, schedule_id,
         fire_time, run_at)
    SELECT %(queue)s, %(task)s, %(args)s::jsonb, %(priority)s, %(max_attempts)s, %(timeout)s,
           'schedule:' || %(schedule_name)s, %(schedule_id)s, f.fire_time, now()
    FROM unnest(%(fire_times)s::timestamptz[]) AS f(fire_time)
    ON CONFLICT (schedule_id, fire_time) WHERE schedule_id IS NOT NULL DO NOTHING
    RETURNING id, queue, fire_time
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue) FROM (SELECT DISTINCT queue FROM inserted) AS q
)
SELECT id, fire_time, (SELECT count(*) FROM notify) AS notified FROM inserted ORDER BY fire_time;

-- name: schedule_advance
UPDATE {schema}.schedules
SET next_run_at = %(next_run_at)s,
    last_fire_at = coalesce(%(last_fire_at)s, last_fire_at)
WHERE id = %(schedule_id)s;

-- name: schedule_get
SELECT *, now() AS db_now FROM {schema}.schedules WHERE name = %(name)s;

-- name: schedule_list
SELECT * FROM {schema}.schedules ORDER BY name;

-- name: schedule_set_paused
-- Pause or resume, with the audit event in the same statement.
WITH changed AS (
    UPDATE {schema}.schedules SET paused = %(paused)s, updated_at = now()
    WHERE name = %(name)s
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, CASE WHEN c.paused THEN 'schedule.paused' ELSE 'schedule.resumed' END,
           'schedule', c.name, '{}'::jsonb
    FROM changed c
), notify AS (  -- wake the scheduler: this may be due before its planned wake-up
    SELECT pg_notify('{schema}.schedules', c.name) FROM changed c
)
SELECT *, (SELECT count(*) FROM notify) AS notified FROM changed;

-- name: schedule_trigger
-- Run a schedule now, outside its cron: one job, its fire time the database's now.
WITH s AS (SELECT * FROM {schema}.schedules WHERE name = %(name)s), job AS (
    INSERT INTO {schema}.jobs
        (queue, task, args, priority, max_attempts, timeout, created_by, schedule_id, fire_time)
    SELECT %(queue)s, s.task, s.args, %(priority)s, %(max_attempts)s, %(timeout)s, %(actor)s,
           s.id, now()
    FROM s
    RETURNING id, queue
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'schedule.triggered', 'schedule', %(name)s, jsonb_build_object('job_id', j.id)
    FROM job j
), notify AS (
    SELECT pg_notify('{schema}.jobs', j.queue) FROM job j
)
SELECT id, (SELECT count(*) FROM notify) AS notified FROM job;

-- name: schedule_set_enabled
-- A disabled schedule is not ticked; enabling it again continues from its next fire time
-- after now (the disabled window is not made up for). Audited in the same statement.
WITH changed AS (
    UPDATE {schema}.schedules
    SET enabled = %(enabled)s,
        next_run_at = CASE WHEN %(enabled)s AND NOT enabled THEN %(next_run_at)s
                           ELSE next_run_at END,
        updated_at = now()
    WHERE name = %(name)s
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, CASE WHEN c.enabled THEN 'schedule.enabled' ELSE 'schedule.disabled' END,
           'schedule', c.name, '{}'::jsonb
    FROM changed c
), notify AS (  -- wake the scheduler: this may be due before its planned wake-up
    SELECT pg_notify('{schema}.schedules', c.name) FROM changed c
)
SELECT *, (SELECT count(*) FROM notify) AS notified FROM changed;

-- name: schedule_create
-- A schedule stored by an operator (origin "api"); a name already taken answers no row.
-- The audit event is written in the same statement.
WITH created AS (
    INSERT INTO {schema}.schedules
        (name, task, args, cron, timezone, queue, priority, misfire, misfire_limit, overlap,
         enabled, next_run_at, origin, task_queue, task_priority, task_max_attempts,
         task_timeout)
    VALUES (%(name)s, %(task)s, %(args)s::jsonb, %(cron)s, %(timezone)s, %(queue)s,
            %(priority)s, %(misfire)s, %(misfire_limit)s, %(overlap)s, %(enabled)s,
            %(next_run_at)s, 'api', %(task_queue)s, %(task_priority)s, %(task_max_attempts)s,
            %(task_timeout)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'schedule.created', 'schedule', c.name,
           jsonb_build_object('task', c.task, 'cron', c.cron, 'timezone', c.timezone)
    FROM created c
), notify AS (  -- wake the scheduler: this may be due before its planned wake-up
    SELECT pg_notify('{schema}.schedules', c.name) FROM created c
)
SELECT *, (SELECT count(*) FROM notify) AS notified FROM created;

-- name: schedule_edit
-- Replace an operator-stored schedule's definition (the caller merged the changes). Only
-- origin "api": a schedule defined in code is rewritten from the code at every start, so an
-- edit would not last. next_run_at is recomputed only when cron or time zone changed.
WITH edited AS (
    UPDATE {schema}.schedules s
    SET task = %(task)s, args = %(args)s::jsonb, queue = %(queue)s, priority = %(priority)s,
        misfire = %(misfire)s, misfire_limit = %(misfire_limit)s, overlap = %(overlap)s,
        enabled = %(enabled)s, task_queue = %(task_queue)s, task_priority = %(task_priority)s,
        task_max_attempts = %(task_max_attempts)s, task_timeout = %(task_timeout)s,
        next_run_at = CASE
            WHEN (s.cron, s.timezone) IS DISTINCT FROM (%(cron)s, %(timezone)s)
                 OR (%(enabled)s AND NOT s.enabled)
            THEN %(next_run_at)s ELSE s.next_run_at END,
        cron = %(cron)s, timezone = %(timezone)s, updated_at = now()
    WHERE s.name = %(name)s AND s.origin = 'api'
    RETURNING s.*
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'schedule.edited', 'schedule', e.name, %(changes)s::jsonb
    FROM edited e
), notify AS (  -- wake the scheduler: this may be due before its planned wake-up
    SELECT pg_notify('{schema}.schedules', c.name) FROM edited c
)
SELECT *, (SELECT count(*) FROM notify) AS notified FROM edited;

-- name: schedule_delete
-- Delete a schedule; jobs it made stay, with their schedule_id, as history. An
-- operator-stored one (origin "api") always; a code-defined one only when no live worker
-- (not stopped, seen within %(stale_after)s seconds) defines it: live code would write it
-- back at its next start, and its code is where to change it; code that no longer runs
-- cannot be changed, so its schedule is the operator's to remove. A definition's schedule
-- (origin "definition") goes with its definition only.
WITH gone AS (
    DELETE FROM {schema}.schedules s
    WHERE s.name = %(name)s
      AND (s.origin = 'api' OR s.origin = 'code' AND NOT EXISTS (  -- orphaned: no live
          SELECT 1 FROM {schema}.workers w                           -- process defines it
          WHERE w.id = ANY(s.defined_by) AND w.stopped_at IS NULL
            AND w.last_seen_at >= now() - make_interval(secs => %(stale_after)s)))
    RETURNING s.name, s.origin
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'schedule.deleted', 'schedule', g.name,
           jsonb_build_object('origin', g.origin)
    FROM gone g
)
SELECT name, origin FROM gone;

-- name: schedule_definers
-- The live workers (see schedule_delete) that define a code schedule.
SELECT w.id, w.host, w.pid
FROM {schema}.schedules s
JOIN {schema}.workers w ON w.id = ANY(s.defined_by)
WHERE s.name = %(name)s AND w.stopped_at IS NULL
  AND w.last_seen_at >= now() - make_interval(secs => %(stale_after)s)
ORDER BY w.started_at;
