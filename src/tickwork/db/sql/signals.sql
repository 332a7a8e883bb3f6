-- Statements on signals, their per-reactor delivery and sweep runs.
-- Signal status: PENDING (waiting for its debounce deadline) -> PROCESSING (taken up; stays
-- so while a reactor's retry is due at next_retry_at) -> COMPLETED; DEAD when a processor
-- died on it more than max_retries times (a poison signal). Reactor delivery status:
-- PENDING (being handled) -> COMPLETED | FAILED (retry at next_retry_at) -> DEAD.

-- name: signal_emit
-- Squash-on-emit, one atomic statement: a PENDING signal of the same type and key absorbs
-- this emit (its deadline slides to now + window, its payload is replaced, updated_at set);
-- otherwise a new signal is inserted. ON CONFLICT has no race to lose and raises nothing,
-- so the caller's transaction is never put at risk. A NULL key (zero-window types) never
-- conflicts: every emit inserts.
INSERT INTO {schema}.signals AS s
    (signal_type, entity_type, entity_id, aggregate_key, organisation_id, payload,
     process_after, max_retries)
VALUES (%(signal_type)s, %(entity_type)s, %(entity_id)s, %(aggregate_key)s,
        %(organisation_id)s, %(payload)s::jsonb,
        now() + make_interval(secs => %(window)s), %(max_retries)s)
ON CONFLICT (signal_type, aggregate_key) WHERE status = 'PENDING'
DO UPDATE SET process_after = EXCLUDED.process_after,  -- each assignment reads EXCLUDED only
              payload = EXCLUDED.payload,
              updated_at = now()
RETURNING s.id, (s.xmax <> 0) AS squashed, s.process_after;

-- name: signal_claim
-- Take up to %(limit)s signals for processing: matured PENDING ones, PROCESSING ones whose
-- reactor retry is due, and PROCESSING ones a processor left behind (claimed longer than
-- %(stuck_after)s seconds ago with no retry scheduled: it died mid-flight). A recovered
-- signal counts a retry; past max_retries it is DEAD rather than crash the next processor
-- too. SKIP LOCKED: a failover twin never waits on rows another processor holds.
WITH ready AS (
    SELECT id, (status = 'PROCESSING' AND next_retry_at IS NULL) AS recovered
    FROM {schema}.signals
    WHERE (status = 'PENDING' AND process_after <= now())
       OR (status = 'PROCESSING' AND next_retry_at <= now())
       OR (status = 'PROCESSING' AND next_retry_at IS NULL
           AND claimed_at < now() - make_interval(secs => %(stuck_after)s))
    ORDER BY coalesce(next_retry_at, process_after)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
UPDATE {schema}.signals s
SET status = CASE WHEN r.recovered AND s.retry_count >= s.max_retries THEN 'DEAD'
                  ELSE 'PROCESSING' END,
    retry_count = s.retry_count + CASE WHEN r.recovered THEN 1 ELSE 0 END,
    claimed_at = now(),
    next_retry_at = NULL,
    processed_at = CASE WHEN r.recovered AND s.retry_count >= s.max_retries THEN now()
                        ELSE s.processed_at END,
    error_message = CASE WHEN r.recovered
        THEN 'left in PROCESSING by a processor that stopped (recovery '
             || (s.retry_count + 1) || ')'
        ELSE s.error_message END
FROM ready r
WHERE s.id = r.id
RETURNING s.*, r.recovered
), tally AS (  -- the rollups (see 0015_tallies.sql): signals that died here
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', c.signal_type, 'DEAD', date_trunc('minute', now()), count(*)
    FROM claimed c WHERE c.status = 'DEAD'
    GROUP BY c.signal_type
)
SELECT * FROM claimed;

-- name: signal_reactor_begin
-- Start one reactor's delivery of one signal, inside the transaction that will also hold the
-- reactor's own writes. The upsert locks the delivery row, so a second processor (a
-- failover twin) waits here and then sees COMPLETED: a reactor's writes commit once.
INSERT INTO {schema}.signal_reactor_status AS r (signal_id, reactor_name, status)
VALUES (%(signal_id)s, %(reactor)s, 'PENDING')
ON CONFLICT (signal_id, reactor_name) DO UPDATE SET status = r.status  -- no-op; takes the lock
RETURNING r.status, r.retry_count, (r.next_retry_at > now()) AS retry_not_due;

-- name: signal_reactor_complete
-- The reactor handled the signal; commits with the reactor's own writes.
UPDATE {schema}.signal_reactor_status
SET status = 'COMPLETED', dry_run = %(dry_run)s, processed_at = now(), error_message = NULL,
    next_retry_at = NULL
WHERE signal_id = %(signal_id)s AND reactor_name = %(reactor)s;

-- name: signal_reactor_fail
-- The reactor raised (its writes were rolled back): FAILED with exponential backoff while
-- retries remain (retry_count counts failures; max_retries retries after the first try),
-- then DEAD.
INSERT INTO {schema}.signal_reactor_status AS r
    (signal_id, reactor_name, status, retry_count, error_message, processed_at, next_retry_at)
VALUES (%(signal_id)s, %(reactor)s,
        CASE WHEN 1 > %(max_retries)s THEN 'DEAD' ELSE 'FAILED' END, 1,
        left(%(error)s, 2000), now(),
        CASE WHEN 1 > %(max_retries)s THEN NULL
             ELSE now() + make_interval(secs => %(backoff)s) END)
ON CONFLICT (signal_id, reactor_name) DO UPDATE
SET retry_count = r.retry_count + 1,
    status = CASE WHEN r.retry_count + 1 > %(max_retries)s THEN 'DEAD' ELSE 'FAILED' END,
    error_message = left(%(error)s, 2000),
    processed_at = now(),
    next_retry_at = CASE WHEN r.retry_count + 1 > %(max_retries)s THEN NULL
        ELSE now() + make_interval(
            secs => least(%(backoff)s * power(2, r.retry_count), %(backoff_cap)s)) END
RETURNING r.status, r.retry_count, r.next_retry_at;

-- name: signal_lock
-- Lock one signal's row until the transaction ends: the processor settles a signal under it,
-- so an operator's retry of a delivery (which locks the row too) is either wholly before the
-- settle's snapshot or waits for it to commit, never read half.
SELECT id FROM {schema}.signals WHERE id = %(signal_id)s FOR UPDATE;

-- name: signal_settle
-- Derive a signal's status from the delivery rows of the reactors it was routed to
-- (%(reactors)s): any FAILED (retries remain) -> stays PROCESSING, due again at the earliest
-- retry; a routed reactor with no row (an operator retried its DEAD delivery during the
-- pass, which removes the row) -> stays PROCESSING, due now; otherwise (all COMPLETED or
-- DEAD, or no reactor at all) -> COMPLETED. DEAD reactors are named in error_message (and
-- logged by the processor). Run after signal_lock, in its transaction.
WITH delivery AS (
    SELECT reactor_name, status, next_retry_at, error_message
    FROM {schema}.signal_reactor_status
    WHERE signal_id = %(signal_id)s AND reactor_name = ANY(%(reactors)s::text[])
), failed AS (
    SELECT min(next_retry_at) AS next_retry_at, count(*) AS n
    FROM delivery WHERE status = 'FAILED'
), replayed AS (
    SELECT count(*) AS n
    FROM unnest(%(reactors)s::text[]) AS routed(name)
    WHERE NOT EXISTS (SELECT 1 FROM delivery d WHERE d.reactor_name = routed.name)
), dead AS (
    SELECT string_agg(reactor_name || ': ' || coalesce(error_message, ''), '; '
                      ORDER BY reactor_name) AS summary
    FROM delivery WHERE status = 'DEAD'
), settled AS (
UPDATE {schema}.signals s
SET status = CASE WHEN f.n + r.n > 0 THEN 'PROCESSING' ELSE 'COMPLETED' END,
    next_retry_at = CASE WHEN r.n > 0 THEN now() ELSE f.next_retry_at END,
    processed_at = CASE WHEN f.n + r.n > 0 THEN s.processed_at ELSE now() END,
    error_message = CASE WHEN d.summary IS NOT NULL THEN 'dead reactors: ' || d.summary
                         WHEN f.n + r.n > 0 THEN 'reactor retry due'
                         ELSE NULL END
FROM failed f, replayed r, dead d
WHERE s.id = %(signal_id)s AND s.status = 'PROCESSING'
RETURNING s.signal_type, s.status, s.next_retry_at, d.summary AS dead_reactors
), tally AS (  -- the rollups (see 0015_tallies.sql)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', signal_type, 'COMPLETED', date_trunc('minute', now()), 1
    FROM settled WHERE status = 'COMPLETED'
)
SELECT status, next_retry_at, dead_reactors FROM settled;

-- name: signal_list
-- Admin listing: every filter optional (NULL = not filtering), newest first, keyset pages.
-- %(failed)s adds the signals with a reactor that failed (FAILED awaiting its retry, or
-- DEAD) to those of %(statuses)s: the `?status=FAILED` of the admin API.
SELECT * FROM {schema}.signals
WHERE ((%(statuses)s::text[] IS NULL AND NOT %(failed)s)
       OR status = ANY(%(statuses)s::text[])
       OR (%(failed)s AND id IN (SELECT signal_id FROM {schema}.signal_reactor_status
                                 WHERE status IN ('FAILED', 'DEAD'))))
  AND (%(signal_type)s::text IS NULL OR signal_type = %(signal_type)s)
  AND (%(aggregate_key)s::text IS NULL OR aggregate_key = %(aggregate_key)s)
  AND (%(organisation_id)s::text IS NULL OR organisation_id = %(organisation_id)s)
  AND (%(created_from)s::timestamptz IS NULL OR created_at >= %(created_from)s)
  AND (%(created_to)s::timestamptz IS NULL OR created_at < %(created_to)s)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: signal_get
SELECT * FROM {schema}.signals WHERE id = %(signal_id)s;

-- name: signal_deliveries
-- A signal's per-reactor delivery: how to find which reactor failed.
SELECT * FROM {schema}.signal_reactor_status WHERE signal_id = %(signal_id)s
ORDER BY reactor_name;

-- name: signal_type_exists
SELECT EXISTS (SELECT 1 FROM {schema}.signals WHERE signal_type = %(signal_type)s) AS exists;

-- name: signal_stats
-- Counts by status and type. The live statuses are counted from their partial indexes, with
-- the oldest signal of each type; COMPLETED and DEAD come from the rollups (see
-- 0015_tallies.sql: folded totals plus what is not folded yet), so the read costs the same
-- however many settled signals retention keeps.
SELECT status, signal_type, count(*) AS n, min(created_at) AS oldest_created_at
FROM {schema}.signals WHERE status = 'PENDING'
GROUP BY status, signal_type
UNION ALL
SELECT status, signal_type, count(*), min(created_at)
FROM {schema}.signals WHERE status = 'PROCESSING'
GROUP BY status, signal_type
UNION ALL
SELECT state, name, sum(n)::bigint, NULL::timestamptz
FROM (SELECT name, state, n FROM {schema}.tally_totals WHERE subject = 'signal'
      UNION ALL
      SELECT name, state, delta FROM {schema}.tallies WHERE subject = 'signal') AS t
GROUP BY state, name
HAVING sum(n) > 0
ORDER BY 1, 2;

-- name: signal_stuck
-- PROCESSING longer than %(older_than)s seconds with no retry scheduled: a hung reactor, or
-- a processor that died mid-flight (the next processor pass recovers these).
SELECT * FROM {schema}.signals
WHERE status = 'PROCESSING' AND next_retry_at IS NULL
  AND claimed_at < now() - make_interval(secs => %(older_than)s)
ORDER BY claimed_at
LIMIT %(limit)s;

-- name: signal_retry
-- Operator retry: a DEAD signal back to PENDING, due now, its reactors' failed and dead
-- deliveries cleared (completed ones stay, so those reactors are not run again) - unless a
-- fresher PENDING signal already holds the same (type, key): then nothing changes and its
-- id is returned as superseded_by (the work is already queued).
WITH target AS (
    SELECT id, status, signal_type, aggregate_key FROM {schema}.signals
    WHERE id = %(signal_id)s FOR UPDATE
), fresher AS (
    SELECT s.id FROM {schema}.signals s, target t
    WHERE t.aggregate_key IS NOT NULL AND s.status = 'PENDING'
      AND s.signal_type = t.signal_type AND s.aggregate_key = t.aggregate_key
    LIMIT 1
), reset AS (
    UPDATE {schema}.signals s
    SET status = 'PENDING', process_after = now(), retry_count = 0, next_retry_at = NULL,
        claimed_at = NULL, processed_at = NULL, error_message = NULL
    FROM target t
    WHERE s.id = t.id AND t.status = 'DEAD' AND NOT EXISTS (SELECT 1 FROM fresher)
    RETURNING s.id
), tally AS (  -- it leaves DEAD (the rollups: see 0015_tallies.sql)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', t.signal_type, 'DEAD', date_trunc('minute', now()), -1
    FROM reset, target t
), cleared AS (
    DELETE FROM {schema}.signal_reactor_status r USING reset
    WHERE r.signal_id = reset.id AND r.status <> 'COMPLETED'
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'signal.retried', 'signal', reset.id::text, '{}'::jsonb FROM reset
)
SELECT t.status AS previous_status, (SELECT id FROM fresher) AS superseded_by,
       EXISTS (SELECT 1 FROM reset) AS reset
FROM target t;

-- name: signal_delivery_retry
-- Operator retry of one reactor's DEAD delivery: the delivery row is removed (the reactor
-- runs again from a fresh count, like a first delivery) and the signal is due now, in
-- PROCESSING (a PENDING one is left as it is: it will be processed anyway). Its other
-- deliveries are untouched: completed reactors are not run again.
WITH target AS (
    SELECT r.id, r.status, s.status AS signal_status, s.signal_type
    FROM {schema}.signal_reactor_status r JOIN {schema}.signals s ON s.id = r.signal_id
    WHERE r.signal_id = %(signal_id)s AND r.reactor_name = %(reactor)s
    FOR UPDATE
), cleared AS (
    DELETE FROM {schema}.signal_reactor_status r USING target t
    WHERE r.id = t.id AND t.status = 'DEAD'
    RETURNING r.id
), due AS (
    UPDATE {schema}.signals s
    SET status = 'PROCESSING', next_retry_at = now(), processed_at = NULL,
        error_message = 'reactor ' || %(reactor)s || ' retried by ' || %(actor)s
    FROM target t
    WHERE s.id = %(signal_id)s AND t.signal_status <> 'PENDING'
      AND EXISTS (SELECT 1 FROM cleared)
    RETURNING s.id
), tally AS (  -- a settled signal leaves COMPLETED or DEAD (see 0015_tallies.sql)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', t.signal_type, t.signal_status, date_trunc('minute', now()), -1
    FROM due, target t
    WHERE t.signal_status IN ('COMPLETED', 'DEAD')
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'signal.delivery_retried', 'signal', %(signal_id)s::text,
           jsonb_build_object('reactor', %(reactor)s::text)
    FROM cleared
)
SELECT t.status AS previous_status, EXISTS (SELECT 1 FROM cleared) AS reset FROM target t;

-- name: signal_cancel
-- Operator cancel: a PENDING signal COMPLETED without processing.
WITH target AS (
    SELECT id, status, signal_type FROM {schema}.signals WHERE id = %(signal_id)s FOR UPDATE
), done AS (
    UPDATE {schema}.signals s
    SET status = 'COMPLETED', processed_at = now(),
        error_message = 'cancelled by ' || %(actor)s || ' without processing'
    FROM target t
    WHERE s.id = t.id AND t.status = 'PENDING'
    RETURNING s.id
), tally AS (  -- the rollups (see 0015_tallies.sql)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', t.signal_type, 'COMPLETED', date_trunc('minute', now()), 1
    FROM done, target t
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'signal.cancelled', 'signal', done.id::text, '{}'::jsonb FROM done
)
SELECT t.status AS previous_status, EXISTS (SELECT 1 FROM done) AS cancelled FROM target t;

-- name: signal_purge
-- Retention: COMPLETED and DEAD signals older than the window, a batch at a time (their
-- deliveries cascade). PENDING and PROCESSING are never purged: an old one is a fault.
WITH gone AS (
    DELETE FROM {schema}.signals
    WHERE id IN (
        SELECT id FROM {schema}.signals
        WHERE status IN ('COMPLETED', 'DEAD')
          AND coalesce(processed_at, created_at) < now() - make_interval(secs => %(older_than)s)
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, signal_type, status
), tally AS (  -- the rows leave the states they held (see 0015_tallies.sql)
    INSERT INTO {schema}.tallies (subject, name, state, minute, delta)
    SELECT 'signal', signal_type, status, date_trunc('minute', now()), -count(*)
    FROM gone
    GROUP BY signal_type, status
)
SELECT id FROM gone;

-- name: sweep_run_start
INSERT INTO {schema}.sweep_runs (reactor_name, holder, trigger, dry_run)
VALUES (%(reactor)s, %(holder)s, %(trigger)s, %(dry_run)s)
RETURNING id, started_at;

-- name: sweep_run_finish
UPDATE {schema}.sweep_runs
SET finished_at = now(), outcome = %(outcome)s, error = left(%(error)s, 2000)
WHERE id = %(run_id)s
RETURNING *;

-- name: sweep_run_latest
-- The last run of each reactor's sweep.
SELECT DISTINCT ON (reactor_name) *
FROM {schema}.sweep_runs
ORDER BY reactor_name, id DESC;

-- name: signal_override_set
-- Set (%(value)s JSON) or drop (NULL) the override %(switch)s for every process that holds
-- one of %(leases)s now; those holders' ids (none: nobody holds them, nothing was stored).
-- The overrides that no longer apply (see the view signal_overrides_live: their holder
-- holds neither signal lease, or took one back after losing both) are deleted on the way
-- (a process keeps one holder id for all its leases: holding SCHEDULER does not count).
WITH holders AS (
    SELECT DISTINCT holder FROM {schema}.leases
    WHERE name = ANY(%(leases)s::text[]) AND expires_at > now()
), stale AS (
    DELETE FROM {schema}.signal_overrides o
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.signal_overrides_live v
                      WHERE v.holder = o.holder AND v.switch = o.switch)
), dropped AS (
    DELETE FROM {schema}.signal_overrides o USING holders h
    WHERE %(value)s::jsonb IS NULL AND o.holder = h.holder AND o.switch = %(switch)s
), stored AS (
    -- set_at: the clock now, after this statement's snapshot, so never before the
    -- acquired_at of a lease the snapshot shows (now() is the transaction's start)
    INSERT INTO {schema}.signal_overrides (holder, switch, value, set_at)
    SELECT holder, %(switch)s, %(value)s::jsonb, clock_timestamp()
    FROM holders WHERE %(value)s::jsonb IS NOT NULL
    ON CONFLICT (holder, switch) DO UPDATE SET value = EXCLUDED.value, set_at = EXCLUDED.set_at
)
SELECT coalesce(array_agg(holder ORDER BY holder), '{}') AS holders FROM holders;

-- name: signal_overrides_of
-- The overrides that apply to one holder now: rows switch, value.
SELECT switch, value FROM {schema}.signal_overrides_live
WHERE holder = %(holder)s ORDER BY switch;

-- name: signal_config_publish
-- A holder's configuration (its switches and reactors, JSON), for the other processes to
-- show; the configurations of holders that hold neither signal lease any more are deleted.
WITH stale AS (
    DELETE FROM {schema}.signal_holder_config c
    WHERE c.holder <> %(holder)s
      AND NOT EXISTS (SELECT 1 FROM {schema}.leases l
                      WHERE l.holder = c.holder AND l.expires_at > now()
                        AND l.name IN ('SIGNAL_MASTER', 'SWEEP_MASTER'))
)
INSERT INTO {schema}.signal_holder_config (holder, config) VALUES (%(holder)s, %(config)s)
ON CONFLICT (holder) DO UPDATE SET config = EXCLUDED.config, published_at = now();

-- name: signal_control_of_lease
-- The live holder of lease %(lease)s, its published configuration and its overrides (an
-- object switch -> value); no row when nobody holds it.
SELECT l.holder, c.config,
       coalesce((SELECT jsonb_object_agg(o.switch, o.value)
                 FROM {schema}.signal_overrides_live o
                 WHERE o.holder = l.holder), '{}'::jsonb) AS overrides
FROM {schema}.leases l
LEFT JOIN {schema}.signal_holder_config c ON c.holder = l.holder
WHERE l.name = %(lease)s AND l.expires_at > now();
