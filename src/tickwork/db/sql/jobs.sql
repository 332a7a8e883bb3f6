-- Statements on the jobs table. "{schema}" is replaced by the configured schema; parameters
-- are psycopg named placeholders. Each statement that changes a job in a way its execution
-- row does not already record appends an audit event in the same statement (same transaction).
-- Notifications: channel "{schema}.jobs" carries a queue name (coalesced per transaction by
-- PostgreSQL); channel "{schema}.control" carries "cancel:<job id>".

-- name: job_insert_many
-- Enqueue a batch in one round trip. The arguments travel as one JSON array, every other
-- column as one typed array (the cheapest forms to send and to decode), zipped in input
-- order (ORDINALITY), so new ids follow input order. A column whose value is the same for
-- every job (the usual batch: one task, one queue) travels once, as the scalar named
-- <column>_all, with an empty array, which ROWS FROM pads with NULLs (the client encodes
-- array elements one at a time, which cost more than the rest of the enqueue, 3.5 ms per
-- 1,000 jobs). A row whose unique_key is held by a
-- job that may still run (PENDING, FAILED awaiting retry, RUNNING) is not inserted: the no-op
-- DO UPDATE returns the existing job instead, atomically, even against a concurrent enqueue
-- of the same key. The answer is one row: the new ids (input order), the whole stored job
-- only for the duplicates (the caller knows the rest), and now() (every new job's
-- created_at).
WITH inserted AS (
    INSERT INTO {schema}.jobs AS j
        (queue, task, args, priority, max_attempts, run_at, timeout, unique_key, created_by,
         trace_context)
    SELECT coalesce(queue, %(queue_all)s::text), coalesce(task, %(task_all)s::text), args::jsonb,
           coalesce(priority, %(priority_all)s::int2),
           coalesce(max_attempts, %(max_attempts_all)s::int4),
           coalesce(run_at, %(run_at_all)s::timestamptz, now()),
           coalesce(timeout, %(timeout_all)s::float8),
           coalesce(unique_key, %(unique_key_all)s::text),
           coalesce(created_by, %(created_by_all)s::text),
           coalesce(trace_context, %(trace_context_all)s::text)
    FROM ROWS FROM (
        json_array_elements(%(args)s::json),
        unnest(%(queue)s::text[]), unnest(%(task)s::text[]), unnest(%(priority)s::int2[]),
        unnest(%(max_attempts)s::int4[]), unnest(%(run_at)s::timestamptz[]),
        unnest(%(timeout)s::float8[]), unnest(%(unique_key)s::text[]),
        unnest(%(created_by)s::text[]), unnest(%(trace_context)s::text[])
    ) WITH ORDINALITY AS i(args, queue, task, priority, max_attempts, run_at, timeout,
                          unique_key, created_by, trace_context, ord)
    ORDER BY ord  -- identity values follow input order; the caller relies on it
    ON CONFLICT (unique_key)
        WHERE unique_key IS NOT NULL AND state IN ('PENDING', 'FAILED', 'RUNNING')
        DO UPDATE SET unique_key = EXCLUDED.unique_key  -- no-op, so RETURNING yields the holder
    RETURNING j.id, j.queue, j.run_at, (j.xmax <> 0) AS duplicate,
              CASE WHEN j.xmax <> 0 THEN to_jsonb(j) || jsonb_build_object(  -- the JSON
                  -- columns as text inside, each decoded alone: a holder stored with a value
                  -- the client cannot decode must not make the whole answer undecodable
                  'args', j.args::text, 'result', j.result::text,
                  'progress', j.progress::text) END AS existing
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE NOT duplicate AND run_at <= now()) AS q
)
SELECT coalesce(array_agg(id ORDER BY id) FILTER (WHERE NOT duplicate), '{}') AS ids,
       coalesce(jsonb_agg(existing) FILTER (WHERE duplicate), '[]') AS duplicates,
       now() AS created_at,
       (SELECT count(*) FROM notify) AS notified
FROM inserted;

-- name: job_insert_many_keyless
-- job_insert_many for a batch in which no job has a unique_key, as most batches are: the same
-- rows and answer, without ON CONFLICT. A job without a key can conflict with no job
-- (jobs_unique_key_idx holds keys only; the other unique indexes hold the identity and
-- schedule fire times), yet an upsert pays for speculative insertion on every row (a lock
-- and a second WAL record per row): 7 to 12 per cent of the statement's server CPU for
-- 1,000 jobs. Given a key anyway, it stores it, and a job holding it already fails the
-- statement (never a silent duplicate).
WITH inserted AS (
    INSERT INTO {schema}.jobs
        (queue, task, args, priority, max_attempts, run_at, timeout, unique_key, created_by,
         trace_context)
    SELECT coalesce(queue, %(queue_all)s::text), coalesce(task, %(task_all)s::text), args::jsonb,
           coalesce(priority, %(priority_all)s::int2),
           coalesce(max_attempts, %(max_attempts_all)s::int4),
           coalesce(run_at, %(run_at_all)s::timestamptz, now()),
           coalesce(timeout, %(timeout_all)s::float8),
           coalesce(unique_key, %(unique_key_all)s::text),
           coalesce(created_by, %(created_by_all)s::text),
           coalesce(trace_context, %(trace_context_all)s::text)
    FROM ROWS FROM (
        json_array_elements(%(args)s::json),
        unnest(%(queue)s::text[]), unnest(%(task)s::text[]), unnest(%(priority)s::int2[]),
        unnest(%(max_attempts)s::int4[]), unnest(%(run_at)s::timestamptz[]),
        unnest(%(timeout)s::float8[]), unnest(%(unique_key)s::text[]),
        unnest(%(created_by)s::text[]), unnest(%(trace_context)s::text[])
    ) WITH ORDINALITY AS i(args, queue, task, priority, max_attempts, run_at, timeout,
                          unique_key, created_by, trace_context, ord)
    ORDER BY ord  -- identity values follow input order; the caller relies on it
    RETURNING id, queue, run_at
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE run_at <= now()) AS q
)
SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids, '[]'::jsonb AS duplicates,
       now() AS created_at,
       (SELECT count(*) FROM notify) AS notified
FROM inserted;

-- name: job_insert
-- One job: the same rules as job_insert_many, in the cheapest form (a single-row VALUES),
-- answered with scalars (the new id, or the whole job holding the key; now()).
WITH inserted AS (
    INSERT INTO {schema}.jobs AS j
        (queue, task, args, priority, max_attempts, run_at, timeout, unique_key, created_by,
         trace_context)
    VALUES (%(queue)s, %(task)s, %(args)s::jsonb, %(priority)s, %(max_attempts)s,
            coalesce(%(run_at)s::timestamptz, now()), %(timeout)s, %(unique_key)s,
            %(created_by)s, %(trace_context)s)
    ON CONFLICT (unique_key)
        WHERE unique_key IS NOT NULL AND state IN ('PENDING', 'FAILED', 'RUNNING')
        DO UPDATE SET unique_key = EXCLUDED.unique_key  -- no-op, so RETURNING yields the holder
    RETURNING j.id, j.queue, j.run_at, (j.xmax <> 0) AS duplicate,
              CASE WHEN j.xmax <> 0 THEN to_jsonb(j) || jsonb_build_object(  -- the JSON
                  -- columns as text inside, each decoded alone: a holder stored with a value
                  -- the client cannot decode must not make the whole answer undecodable
                  'args', j.args::text, 'result', j.result::text,
                  'progress', j.progress::text) END AS existing
), notify AS (
    SELECT pg_notify('{schema}.jobs', queue) FROM inserted WHERE NOT duplicate AND run_at <= now()
)
SELECT id, existing, now() AS created_at, (SELECT count(*) FROM notify) AS notified
FROM inserted;

-- name: job_get
-- One job with the error of its most recent failed attempt.
SELECT j.*, false AS duplicate,
       (SELECT e.error FROM {schema}.executions e
        WHERE e.job_id = j.id AND e.error IS NOT NULL
        ORDER BY e.id DESC LIMIT 1) AS error
FROM {schema}.jobs j
WHERE j.id = %(job_id)s;

-- name: job_claim
-- Claim up to %(limit)s runnable jobs of the worker's queues and tasks, highest priority then
-- oldest first, and start one execution per job with a lease on the database clock. SKIP
-- LOCKED lets any number of claimers run at once: a row another claimer holds is skipped,
-- never waited for. Only the jobs table is locked by the scan (no join), the new executions
-- cannot be held by anyone else yet, so this does not break the execution-then-job lock order.
-- Only the tasks in %(tasks)s are claimed: a job of a task this worker does not have waits for
-- a worker that has it, instead of spending an attempt here.
-- One index range per (queue, task) pair (LATERAL), read in claim order from
-- jobs_runnable_idx, so jobs of other tasks in front are never read; the best of each range
-- are merged. Rows a range locks beyond the final LIMIT are released when this statement's
-- transaction commits, a moment later.
WITH next AS (
    SELECT c.id
    FROM (
        SELECT u.name FROM unnest(%(queues)s::text[]) AS u(name)
        WHERE NOT EXISTS (  -- a paused queue is not claimed from (nor are its rows locked)
            SELECT 1 FROM {schema}.queues p WHERE p.name = u.name AND p.paused)
    ) AS q
    CROSS JOIN unnest(%(tasks)s::text[]) AS t(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at
        FROM {schema}.jobs
        WHERE queue = q.name
          AND task = t.name
          AND state IN ('PENDING', 'FAILED')  -- FAILED here means "retry due at run_at"
          AND run_at <= now()
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE {schema}.jobs j
    SET state = 'RUNNING', attempts = j.attempts + 1
    WHERE j.id = ANY(ARRAY(SELECT id FROM next))  -- by primary key, never a join scan
    RETURNING j.*
), started AS (
    INSERT INTO {schema}.executions (job_id, attempt, worker_id, lease_expires_at)
    SELECT id, attempts, %(worker_id)s, now() + make_interval(secs => %(lease_ttl)s)
    FROM claimed
    RETURNING id, job_id, lease_expires_at
)
-- The worker reads these rows by position, in the order of Job's fields (keep them in step
-- with worker.py's _start). args travel as text: the worker decodes every claimed job's
-- arguments in one JSON parse (one parser call per row costs more than the rest of the row).
-- The state is RUNNING by construction; waited is how long the job waited after it was due.
SELECT c.id, c.queue, c.task, c.args::text AS args, c.priority, c.attempts, c.max_attempts,
       c.run_at, c.timeout, c.created_at, c.created_by, c.unique_key, c.result,
       c.cancel_requested_at, c.finished_at, c.schedule_id, c.fire_time,
       s.id AS execution_id, extract(epoch FROM now() - c.run_at)::float8 AS waited,
       c.trace_context
FROM claimed c
JOIN started s ON s.job_id = c.id
ORDER BY c.priority DESC, c.run_at, c.id;

-- name: job_claim_capped
-- job_claim for a worker with tasks of both kinds and fewer threads free than slots: jobs of
-- the tasks in %(tasks)s (async handlers) up to %(limit)s, of those in %(sync_tasks)s (sync
-- handlers) up to %(sync_limit)s, the worker's free threads: a job claimed for a thread that is
-- not free would sit on its lease while another worker could run it. The same ranges, locks
-- and answer as job_claim (keep the two in step: a test compares them); a worker whose jobs
-- can all run now uses job_claim, which this UNION would slow by ~0.1 ms a claim.
WITH next AS (
    SELECT c.id, c.priority, c.run_at
    FROM (
        SELECT u.name FROM unnest(%(queues)s::text[]) AS u(name)
        WHERE NOT EXISTS (  -- a paused queue is not claimed from (nor are its rows locked)
            SELECT 1 FROM {schema}.queues p WHERE p.name = u.name AND p.paused)
    ) AS q
    CROSS JOIN unnest(%(tasks)s::text[]) AS t(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at
        FROM {schema}.jobs
        WHERE queue = q.name
          AND task = t.name
          AND state IN ('PENDING', 'FAILED')  -- FAILED here means "retry due at run_at"
          AND run_at <= now()
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL (
        SELECT c.id, c.priority, c.run_at
        FROM (
            SELECT u.name FROM unnest(%(queues)s::text[]) AS u(name)
            WHERE NOT EXISTS (
                SELECT 1 FROM {schema}.queues p WHERE p.name = u.name AND p.paused)
        ) AS q
        CROSS JOIN unnest(%(sync_tasks)s::text[]) AS t(name)
        CROSS JOIN LATERAL (
            SELECT id, priority, run_at
            FROM {schema}.jobs
            WHERE queue = q.name
              AND task = t.name
              AND state IN ('PENDING', 'FAILED')
              AND run_at <= now()
            ORDER BY priority DESC, run_at, id
            LIMIT %(sync_limit)s
            FOR UPDATE SKIP LOCKED
        ) AS c
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT %(sync_limit)s  -- no more sync jobs than free threads, across the sync tasks
    )
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
), claimed AS (
    UPDATE {schema}.jobs j
    SET state = 'RUNNING', attempts = j.attempts + 1
    WHERE j.id = ANY(ARRAY(SELECT id FROM next))  -- by primary key, never a join scan
    RETURNING j.*
), started AS (
    INSERT INTO {schema}.executions (job_id, attempt, worker_id, lease_expires_at)
    SELECT id, attempts, %(worker_id)s, now() + make_interval(secs => %(lease_ttl)s)
    FROM claimed
    RETURNING id, job_id, lease_expires_at
)
-- The worker reads these rows by position, in the order of Job's fields (keep them in step
-- with worker.py's _start). args travel as text: the worker decodes every claimed job's
-- arguments in one JSON parse (one parser call per row costs more than the rest of the row).
-- The state is RUNNING by construction; waited is how long the job waited after it was due.
SELECT c.id, c.queue, c.task, c.args::text AS args, c.priority, c.attempts, c.max_attempts,
       c.run_at, c.timeout, c.created_at, c.created_by, c.unique_key, c.result,
       c.cancel_requested_at, c.finished_at, c.schedule_id, c.fire_time,
       s.id AS execution_id, extract(epoch FROM now() - c.run_at)::float8 AS waited,
       c.trace_context
FROM claimed c
JOIN started s ON s.job_id = c.id
ORDER BY c.priority DESC, c.run_at, c.id;

-- name: job_complete_many
-- Record the outcome of finished attempts, one statement per batch (the batch is one JSON
-- array of {job_id, execution_id, outcome, result, error, retry_delay, progress}; progress is
-- the handler's last ctx.progress report, when it made one). Fencing: an attempt is
-- recorded only while its execution is still RUNNING; a worker whose lease was reclaimed
-- changes 0 rows and cannot overwrite a newer attempt. The execution row is locked first,
-- then the job (the global lock order). The batch comes in the order attempts finished;
-- sorted by job, it is locked in job id order, as job_cancel and job_retry lock jobs, by the
-- plans chosen for a jobs table of any real size (each join keeps its sorted input's order or
-- reads an index in that order). A near-empty table is read sequentially, in physical order:
-- a deadlock there is broken by the database aborting one statement, and both this one and
-- a bulk cancel or retry are run again. Ordering by an explicit row lock first cost 6x.
WITH done AS (
    SELECT *
    FROM jsonb_to_recordset(%(outcomes)s::jsonb) AS d(
        job_id bigint, execution_id bigint, outcome text, result jsonb, error jsonb,
        retry_delay float8, progress jsonb)
    ORDER BY job_id  -- lock order: see above
), fenced AS (
    UPDATE {schema}.executions e
    SET state = d.outcome, finished_at = now(), error = d.error
    FROM done d
    WHERE e.job_id = d.job_id AND e.id = d.execution_id  -- the primary key
      AND e.job_id = ANY(ARRAY(SELECT job_id FROM done))  -- lets the planner use the key
      AND e.state = 'RUNNING'  -- fencing: a reclaimed or released attempt must not complete
    RETURNING e.id, e.job_id, e.worker_id, d.outcome, d.result, d.retry_delay, d.progress
), finished AS (
    UPDATE {schema}.jobs j
    SET state = CASE
            WHEN j.cancel_requested_at IS NOT NULL OR f.outcome = 'CANCELLED' THEN 'CANCELLED'
            WHEN f.outcome = 'SUCCEEDED' THEN 'SUCCEEDED'
            WHEN j.attempts >= j.max_attempts THEN 'DEAD_LETTER'
            ELSE 'FAILED'
        END,
        result = CASE WHEN f.outcome = 'SUCCEEDED' THEN f.result ELSE j.result END,
        progress = CASE WHEN f.progress IS NULL THEN j.progress
                        ELSE f.progress || jsonb_build_object('at', now()) END,
        run_at = CASE
            WHEN f.outcome = 'FAILED' AND j.cancel_requested_at IS NULL
                 AND j.attempts < j.max_attempts
            THEN now() + make_interval(secs => f.retry_delay)  -- backoff before the retry
            ELSE j.run_at
        END,
        finished_at = CASE
            WHEN f.outcome = 'FAILED' AND j.cancel_requested_at IS NULL
                 AND j.attempts < j.max_attempts
            THEN NULL
            ELSE now()
        END
    FROM fenced f
    WHERE j.id = f.job_id
      AND j.state = 'RUNNING'
    RETURNING j.id, j.queue, j.state, j.attempts, f.id AS execution_id, f.worker_id
), tally AS (  -- the rollups (see 0015_tallies.sql): one row per queue and state reached
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', f.queue, f.state, date_trunc('minute', now()), count(*)
    FROM finished f
    GROUP BY f.queue, f.state
), audit AS (
    -- success and retry are recorded by the execution row; only these need an event
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT 'worker:' || f.worker_id,
           CASE f.state WHEN 'CANCELLED' THEN 'job.cancelled' ELSE 'job.dead_lettered' END,
           'job', f.id::text,
           jsonb_build_object('execution_id', f.execution_id, 'attempts', f.attempts)
    FROM finished f
    WHERE f.state IN ('CANCELLED', 'DEAD_LETTER')
), notify AS (
    -- one notification per batch for app.wait(): the ids of the jobs that reached a final
    -- state ('' when they would not fit a payload: every waiter then looks)
    SELECT pg_notify('{schema}.finished', CASE WHEN length(ids) <= 7000 THEN ids ELSE '' END)
    FROM (SELECT string_agg(f.id::text, ',') AS ids FROM finished f
          WHERE f.state <> 'FAILED') AS e
    WHERE ids IS NOT NULL
)
-- The answer lists only the exceptions, so the usual batch answers with no rows at all: an
-- attempt whose job did not end in the state named like its outcome (a retry dead-lettered,
-- a cancel honoured), or that was fenced off (state NULL). The count only makes the notify
-- run (a CTE that is not read is not run).
SELECT d.execution_id, f.state
FROM done d
LEFT JOIN finished f ON f.execution_id = d.execution_id
WHERE f.state IS DISTINCT FROM d.outcome
  AND (SELECT count(*) FROM notify) >= 0;

-- name: job_dead_letter_undecodable
-- End the attempts the worker claimed but could not start because their job's stored row
-- cannot be decoded (%(undecodable)s: a JSON array of {job_id, execution_id, message}; args
-- nested past the reader's depth, not an object, ...): no retry could decode it either, so
-- the job goes to the dead letter at once instead of spending its attempts, and the jobs
-- claimed with it run as if it had not been. Fenced and locked as job_complete_many: only a
-- live (RUNNING) execution is ended, the execution first, then the job. A cancel requested
-- meanwhile is honoured. One answer row per job ended.
WITH bad AS (
    SELECT *
    FROM jsonb_to_recordset(%(undecodable)s::jsonb) AS b(
        job_id bigint, execution_id bigint, message text)
    ORDER BY job_id  -- lock order: as job_complete_many
), failed AS (
    UPDATE {schema}.executions e
    SET state = 'FAILED', finished_at = now(),
        error = jsonb_build_object(
            'type', 'tickwork.Undecodable', 'message', b.message, 'traceback', '')
    FROM bad b
    WHERE e.job_id = b.job_id AND e.id = b.execution_id  -- the primary key
      AND e.state = 'RUNNING'  -- fencing: a reclaimed attempt is not ended twice
    RETURNING e.id, e.job_id, e.worker_id
), ended AS (
    UPDATE {schema}.jobs j
    SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'CANCELLED'
                     ELSE 'DEAD_LETTER' END,  -- never FAILED: a retry could not decode it
        finished_at = now()
    FROM failed f
    WHERE j.id = f.job_id
      AND j.state = 'RUNNING'
    RETURNING j.id, j.queue, j.state, j.attempts, f.id AS execution_id, f.worker_id
), tally AS (  -- the rollups (see 0015_tallies.sql), as job_complete_many
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', d.queue, d.state, date_trunc('minute', now()), count(*)
    FROM ended d
    GROUP BY d.queue, d.state
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT 'worker:' || d.worker_id,
           CASE d.state WHEN 'CANCELLED' THEN 'job.cancelled' ELSE 'job.dead_lettered' END,
           'job', d.id::text,
           jsonb_build_object('execution_id', d.execution_id, 'attempts', d.attempts,
                              'reason', 'undecodable')
    FROM ended d
), notify AS (  -- app.wait(): these jobs are final
    SELECT pg_notify('{schema}.finished', CASE WHEN length(ids) <= 7000 THEN ids ELSE '' END)
    FROM (SELECT string_agg(d.id::text, ',') AS ids FROM ended d) AS e
    WHERE ids IS NOT NULL
)
SELECT d.id, d.state, (SELECT count(*) FROM notify) AS notified
FROM ended d;

-- name: job_cancel
-- Cancel the jobs %(job_ids)s (one or many). PENDING or FAILED (awaiting retry): cancel at
-- once. RUNNING: record the request; the job becomes CANCELLED when the attempt completes,
-- and the worker is told over "control". FOR UPDATE re-reads each row after any concurrent
-- claim or completion commits, so the decision is made on the current state; rows are locked
-- in id order, so two bulk operations cannot deadlock. One answer row per job found.
WITH target AS (
    SELECT id, state FROM {schema}.jobs WHERE id = ANY(%(job_ids)s::bigint[])
    ORDER BY id FOR UPDATE
), changed AS (
    UPDATE {schema}.jobs j
    SET state = CASE WHEN t.state = 'RUNNING' THEN 'RUNNING' ELSE 'CANCELLED' END,
        cancel_requested_at = CASE
            WHEN t.state = 'RUNNING' THEN coalesce(j.cancel_requested_at, now())
            ELSE j.cancel_requested_at
        END,
        finished_at = CASE WHEN t.state = 'RUNNING' THEN j.finished_at ELSE now() END
    FROM target t
    WHERE j.id = t.id AND t.state IN ('PENDING', 'FAILED', 'RUNNING')
    RETURNING j.id, j.queue, j.state
), tally AS (  -- the rollups (see 0015_tallies.sql): one row per queue and state reached
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', c.queue, c.state, date_trunc('minute', now()), count(*)
    FROM changed c
    WHERE c.state = 'CANCELLED'
    GROUP BY c.queue, c.state
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s,
           CASE c.state WHEN 'CANCELLED' THEN 'job.cancelled' ELSE 'job.cancel_requested' END,
           'job', c.id::text, jsonb_build_object('from', t.state)
    FROM changed c JOIN target t ON t.id = c.id
), notify AS (
    SELECT pg_notify('{schema}.control', 'cancel:' || c.id) FROM changed c
    WHERE c.state = 'RUNNING'
    UNION ALL  -- app.wait(): jobs cancelled at once are final (one notification for all)
    SELECT pg_notify('{schema}.finished', CASE WHEN length(ids) <= 7000 THEN ids ELSE '' END)
    FROM (SELECT string_agg(c.id::text, ',') AS ids FROM changed c
          WHERE c.state = 'CANCELLED') AS e
    WHERE ids IS NOT NULL
)
SELECT t.id, t.state AS previous_state, c.state AS state,
       (SELECT count(*) FROM notify) AS notified
FROM target t
LEFT JOIN changed c ON c.id = t.id;

-- name: job_retry
-- Manual retry of the jobs %(job_ids)s: DEAD_LETTER or FAILED back to PENDING now.
-- Executions stay as history; a job whose attempts are exhausted is granted one more.
-- A definition's run named in %(rerun_ids)s is retried with that definition as it is now:
-- its fields (%(rerun_fields)s, JSON text) put over the run's snapshot and its runtime's
-- queue (%(rerun_queues)s), so an operator's retry never runs a version an ADMIN replaced
-- (the caller holds those definitions FOR SHARE: definition_lock_shared).
-- Locks in id order, one answer row per job found (as job_cancel).
WITH target AS (
    SELECT id, state, queue, args -> 'definition' -> 'version' AS version
    FROM {schema}.jobs WHERE id = ANY(%(job_ids)s::bigint[])
    ORDER BY id FOR UPDATE
), rerun AS (
    SELECT r.id, r.fields::jsonb AS fields, r.queue
    FROM unnest(%(rerun_ids)s::bigint[], %(rerun_fields)s::text[], %(rerun_queues)s::text[])
         AS r(id, fields, queue)
), changed AS (
    UPDATE {schema}.jobs j
    SET state = 'PENDING', run_at = now(), finished_at = NULL, cancel_requested_at = NULL,
        max_attempts = greatest(j.max_attempts, j.attempts + 1),
        args = CASE WHEN r.id IS NULL THEN j.args ELSE j.args || r.fields END,
        queue = coalesce(r.queue, j.queue)
    FROM target t LEFT JOIN rerun r ON r.id = t.id
    WHERE j.id = t.id AND t.state IN ('DEAD_LETTER', 'FAILED')
    RETURNING j.id, j.state, j.queue, j.max_attempts, r.id IS NOT NULL AS rerun,
              j.args -> 'definition' -> 'version' AS version
), tally AS (  -- a dead letter leaves DEAD_LETTER (FAILED is live: not tallied as a state held)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', t.queue, 'DEAD_LETTER', date_trunc('minute', now()), -count(*)
    FROM changed c JOIN target t ON t.id = c.id
    WHERE t.state = 'DEAD_LETTER'
    GROUP BY t.queue  -- the queue it was held on (a rerun may move it to another)
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'job.retried', 'job', c.id::text,
           jsonb_build_object('from', t.state, 'max_attempts', c.max_attempts)
           || CASE WHEN c.rerun  -- which version the retry runs, and which the run had
                   THEN jsonb_build_object('definition_version', c.version,
                                           'snapshot_version', t.version)
                   ELSE '{}'::jsonb END
    FROM changed c JOIN target t ON t.id = c.id
), notify AS (
    SELECT pg_notify('{schema}.jobs', q.queue) FROM (SELECT DISTINCT queue FROM changed) AS q
)
SELECT t.id, t.state AS previous_state, c.state AS state,
       (SELECT count(*) FROM notify) AS notified
FROM target t
LEFT JOIN changed c ON c.id = t.id;

-- name: job_delete
-- An operator deletes the job %(job_id)s with its executions (its attempts' history), unless
-- it is RUNNING: an attempt holds its lease and would complete a job that is gone (cancel it
-- first; once the attempt ends the job may go). FOR UPDATE waits for a claim or an outcome in
-- flight on the row and re-reads it once that commits, so the state decided on is the
-- current one, never an earlier read's; a claim that comes after finds the row locked and
-- skips it (SKIP LOCKED), then gone. The executions are taken after the job, against the
-- execution-then-job lock order, as job_prune_finished takes them: a job that is not
-- RUNNING has no live execution, and the completer and the watchdog lock live ones only,
-- so no statement can hold one of these and wait for the job. The audit event is not tied
-- to the row (audit events name their target by type and id, no foreign key): it outlives
-- the job and records who deleted it, with what the job was. Nothing else refers to a job
-- row: the unique key and the (schedule, fire time) it held go with it, so a schedule does
-- not fire that time again (its next_run_at has moved past it) and a new enqueue may take
-- the key. One answer row when the job exists: its state, and whether it was deleted.
WITH target AS (
    SELECT id, state FROM {schema}.jobs WHERE id = %(job_id)s
    FOR UPDATE
), gone AS (
    DELETE FROM {schema}.jobs j
    USING target t
    WHERE j.id = t.id
      AND t.state <> 'RUNNING'  -- a live attempt holds the job: it is deleted once it ends
    RETURNING j.id, j.queue, j.task, j.state, j.attempts, j.created_at, j.created_by,
              j.finished_at, j.schedule_id, j.fire_time, j.unique_key
), executions_gone AS (
    DELETE FROM {schema}.executions e
    WHERE e.job_id = ANY(ARRAY(SELECT id FROM gone))  -- the primary key's leading column
    RETURNING e.id
), tally AS (  -- the row leaves the final state it held (FAILED is live: not tallied as held)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', g.queue, g.state, date_trunc('minute', now()), -1
    FROM gone g
    WHERE g.state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'job.deleted', 'job', g.id::text,
           jsonb_build_object(
               'from', g.state, 'queue', g.queue, 'task', g.task, 'attempts', g.attempts,
               'created_at', g.created_at, 'created_by', g.created_by,
               'finished_at', g.finished_at, 'schedule_id', g.schedule_id,
               'fire_time', g.fire_time, 'unique_key', g.unique_key,
               'executions', (SELECT count(*) FROM executions_gone))
    FROM gone g
), notify AS (
    -- app.wait() on a job still waiting wakes and finds it gone; the dashboard's lists reload
    SELECT pg_notify('{schema}.finished', g.id::text) FROM gone g
)
SELECT t.id, t.state, (g.id IS NOT NULL) AS deleted,
       (SELECT count(*) FROM executions_gone) AS executions,
       (SELECT count(*) FROM notify) AS notified
FROM target t
LEFT JOIN gone g ON g.id = t.id;

-- name: job_list
-- Operators' job listing: every filter is optional (NULL = not filtering), newest first,
-- keyset-paginated by id (%(before_id)s: the last id of the previous page). A text search
-- (%(text)s: matched whole against the id; %(pattern)s: an ILIKE pattern, NULL for an id
-- only) looks at ids from %(floor_id)s up only: job_window bounds how many rows one page of a
-- search reads. Arguments and results stored larger than 64 kB are not searched. Arguments and
-- results larger than %(value_cap)s bytes of JSON are left out (NULL, named in "omitted"):
-- a page must not carry megabytes per job; job_get returns them whole. Sizes are measured
-- on the page only, after the limit.
SELECT p.id, p.queue, p.task, p.state, p.priority, p.attempts, p.max_attempts, p.run_at,
       p.timeout, p.unique_key, p.created_at, p.created_by, p.cancel_requested_at,
       p.finished_at, p.schedule_id, p.fire_time, p.progress,
       CASE WHEN NOT s.big_args THEN p.args END AS args,
       CASE WHEN NOT s.big_result THEN p.result END AS result,
       array_remove(ARRAY[CASE WHEN s.big_args THEN 'args' END,
                          CASE WHEN s.big_result THEN 'result' END], NULL) AS omitted,
       false AS duplicate, NULL::jsonb AS error
FROM (
    SELECT j.*
    FROM {schema}.jobs j
    WHERE (%(states)s::text[] IS NULL OR j.state = ANY(%(states)s::text[]))
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
      AND (%(task)s::text IS NULL OR j.task = %(task)s)
      AND (%(schedule_id)s::bigint IS NULL OR j.schedule_id = %(schedule_id)s)
      AND (%(created_from)s::timestamptz IS NULL OR j.created_at >= %(created_from)s)
      AND (%(created_to)s::timestamptz IS NULL OR j.created_at < %(created_to)s)
      AND (%(finished_from)s::timestamptz IS NULL OR j.finished_at >= %(finished_from)s)
      AND (%(finished_to)s::timestamptz IS NULL OR j.finished_at < %(finished_to)s)
      AND (%(before_id)s::bigint IS NULL OR j.id < %(before_id)s)
      AND (%(floor_id)s::bigint IS NULL OR j.id >= %(floor_id)s)
      AND (%(text)s::text IS NULL
           OR j.id::text = %(text)s
           OR (%(pattern)s::text IS NOT NULL
               AND (j.task ILIKE %(pattern)s
                    OR j.unique_key ILIKE %(pattern)s
                    OR j.created_by ILIKE %(pattern)s
                    OR (pg_column_size(j.args) <= 65536 AND j.args::text ILIKE %(pattern)s)
                    OR (pg_column_size(j.result) <= 65536
                        AND j.result::text ILIKE %(pattern)s)
                    OR EXISTS (SELECT 1 FROM {schema}.executions e
                               WHERE e.job_id = j.id AND e.error IS NOT NULL
                                 AND pg_column_size(e.error) <= 65536
                                 AND e.error::text ILIKE %(pattern)s))))
    ORDER BY j.id DESC
    LIMIT %(limit)s
) p
CROSS JOIN LATERAL (
    SELECT %(value_cap)s = 0 OR octet_length(p.args::text) > %(value_cap)s AS big_args,
           coalesce(%(value_cap)s = 0 OR octet_length(p.result::text) > %(value_cap)s, false)
               AS big_result
) s
ORDER BY p.id DESC;

-- name: job_window
-- The newest %(cap)s jobs job_list's filters select (the same filters, the same NULL = not
-- filtering), older than %(before_id)s: how many there are and the oldest id among them.
-- Serves a bounded count (cap: the bound + 1) and the window one page of a text search
-- reads; either way a filter matching millions costs what %(cap)s rows cost.
SELECT count(*) AS n, min(w.id) AS floor_id
FROM (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE (%(states)s::text[] IS NULL OR j.state = ANY(%(states)s::text[]))
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
      AND (%(task)s::text IS NULL OR j.task = %(task)s)
      AND (%(schedule_id)s::bigint IS NULL OR j.schedule_id = %(schedule_id)s)
      AND (%(created_from)s::timestamptz IS NULL OR j.created_at >= %(created_from)s)
      AND (%(created_to)s::timestamptz IS NULL OR j.created_at < %(created_to)s)
      AND (%(finished_from)s::timestamptz IS NULL OR j.finished_at >= %(finished_from)s)
      AND (%(finished_to)s::timestamptz IS NULL OR j.finished_at < %(finished_to)s)
      AND (%(before_id)s::bigint IS NULL OR j.id < %(before_id)s)
    ORDER BY j.id DESC
    LIMIT %(cap)s
) AS w;

-- name: job_prune_finished
-- Retention: delete jobs that finished before their window, with their executions, a batch
-- at a time. PENDING, FAILED (awaiting retry) and RUNNING jobs are never touched. SKIP
-- LOCKED: several processes may prune at once without waiting on each other.
WITH doomed AS (
    SELECT id
    FROM {schema}.jobs
    WHERE finished_at < now() - make_interval(secs => least(%(finished_after)s,
                                                            %(dead_letter_after)s))
      AND (
        (state IN ('SUCCEEDED', 'CANCELLED')
            AND finished_at < now() - make_interval(secs => %(finished_after)s))
        OR (state = 'DEAD_LETTER'
            AND finished_at < now() - make_interval(secs => %(dead_letter_after)s))
      )
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), executions_gone AS (
    DELETE FROM {schema}.executions WHERE job_id = ANY(ARRAY(SELECT id FROM doomed))
), gone AS (
    DELETE FROM {schema}.jobs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING id, queue, state
), tally AS (  -- the rows leave the states they held
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'job', g.queue, g.state, date_trunc('minute', now()), -count(*)
    FROM gone g
    GROUP BY g.queue, g.state
)
SELECT id FROM gone;

-- name: job_tables_vacuum
-- Run outside a transaction (VACUUM refuses one): reclaims the dead rows every job update
-- leaves behind, where the server's autovacuum does not.
VACUUM (ANALYZE) {schema}.jobs, {schema}.executions, {schema}.tallies, {schema}.tally_totals;

-- name: job_dead_rows
-- The dead row versions in the jobs table by the server's statistics (a claim and an outcome
-- leave one each; a vacuum reclaims them). The statistics lag by up to a second.
SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables
                 WHERE relid = '{schema}.jobs'::regclass), 0)::bigint AS dead;

-- name: job_vacuum
-- Run outside a transaction. Only the jobs table, the one claims read: every job claimed
-- since the last vacuum leaves an index entry at the head of the claim's range in
-- jobs_runnable_idx, and every claim steps over them. INDEX_CLEANUP ON: with few dead rows
-- in a large table the server would otherwise skip the indexes, and the index is the point.
-- SKIP_LOCKED: never queue behind a vacuum already at work on the table (autovacuum's).
VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {schema}.jobs;

-- name: job_progress_many
-- Store what running handlers reported of their progress, one statement per batch (a JSON
-- array of {job_id, execution_id, progress}). Only while the attempt is the live one: a
-- worker that lost its lease cannot overwrite a newer attempt's progress. The execution is
-- read, not locked, and only the job is locked (in job id order), so the lock order holds.
UPDATE {schema}.jobs j
SET progress = p.progress || jsonb_build_object('at', now())
FROM (
    SELECT * FROM jsonb_to_recordset(%(reports)s::jsonb)
        AS r(job_id bigint, execution_id bigint, progress jsonb)
    ORDER BY job_id
) AS p
WHERE j.id = p.job_id
  AND j.state = 'RUNNING'
  AND EXISTS (  -- fencing: only the live attempt reports
      SELECT 1 FROM {schema}.executions e
      WHERE e.job_id = p.job_id AND e.id = p.execution_id AND e.state = 'RUNNING');

-- name: job_due_queues
-- The queues holding a job due now, not paused (the testing helpers' drain): a look at the
-- runnable index only.
SELECT DISTINCT j.queue
FROM {schema}.jobs j
WHERE j.state IN ('PENDING', 'FAILED')
  AND j.run_at <= now()
  AND NOT EXISTS (SELECT 1 FROM {schema}.queues q WHERE q.name = j.queue AND q.paused)
ORDER BY 1;
