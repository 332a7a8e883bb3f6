-- The rollups of finished work (tables in 0015_tallies.sql): the fold that turns appended
-- tallies into totals and minutes, and the reads of the minutes.

-- name: tally_fold
-- Fold up to %(limit)s appended tallies into tally_totals (final states only: a FAILED job
-- is live, counted from its index) and tally_minutes (arrivals only), and delete them, in one
-- statement. SKIP LOCKED: several processes may fold at once, each taking rows the others
-- do not; a tally still being written is not visible yet and is taken by a later fold. The
-- upserts run in key order, so two folds cannot deadlock on the folded rows.
WITH taken AS (
    DELETE FROM {schema}.tallies
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM {schema}.tallies LIMIT %(limit)s FOR UPDATE SKIP LOCKED))
    RETURNING subject, name, state, minute, delta
), totals AS (
    INSERT INTO {schema}.tally_totals AS o (subject, name, state, n)
    SELECT subject, name, state, sum(delta)
    FROM taken
    WHERE state <> 'FAILED'
    GROUP BY subject, name, state
    ORDER BY subject, name, state
    ON CONFLICT (subject, name, state) DO UPDATE SET n = o.n + EXCLUDED.n
), minutes AS (
    INSERT INTO {schema}.tally_minutes AS m (subject, minute, name, state, n)
    SELECT subject, minute, name, state, sum(delta)
    FROM taken
    WHERE delta > 0
    GROUP BY subject, minute, name, state
    ORDER BY subject, minute, name, state
    ON CONFLICT (subject, minute, name, state) DO UPDATE SET n = m.n + EXCLUDED.n
)
SELECT count(*) AS folded FROM taken;

-- name: tally_minutes_prune
-- Throughput minutes older than the window (seconds), a batch at a time.
DELETE FROM {schema}.tally_minutes
WHERE (subject, minute, name, state) IN (
    SELECT subject, minute, name, state FROM {schema}.tally_minutes
    WHERE minute < now() - make_interval(secs => %(older_than)s)
    LIMIT %(limit)s
)
RETURNING minute;

-- name: tally_throughput
-- Arrivals of the %(subject)s's states per name, from %(start)s (inclusive) to %(end)s
-- (exclusive), summed into buckets of %(step)s seconds (aligned to the Unix epoch): folded
-- minutes plus the tallies not folded yet. Only buckets with arrivals are answered.
SELECT date_bin(make_interval(secs => %(step)s), minute, 'epoch'::timestamptz) AS bucket,
       name, state, sum(n)::bigint AS n
FROM (
    SELECT minute, name, state, n FROM {schema}.tally_minutes
    WHERE subject = %(subject)s AND minute >= %(start)s AND minute < %(end)s
      AND (%(name)s::text IS NULL OR name = %(name)s)
    UNION ALL
    SELECT minute, name, state, delta FROM {schema}.tallies
    WHERE subject = %(subject)s AND minute >= %(start)s AND minute < %(end)s AND delta > 0
      AND (%(name)s::text IS NULL OR name = %(name)s)
) AS arrivals
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;

-- name: tally_recount_lock
-- Recount (tally_fold, tally_recount_clear, tally_recount): the totals made again from the
-- tables, for states written by hand. First, in the same transaction, wait for every
-- statement that appended or folds tallies to commit, and hold new ones back until the
-- recount commits (each appends in the statement that changes the rows, and takes its
-- lock on tallies before it changes any): so a change is either in the recount's snapshot
-- or tallied after it, never both or neither.
LOCK TABLE {schema}.tallies IN SHARE ROW EXCLUSIVE MODE;

-- name: tally_recount_clear
-- After the lock and a fold of every tally (their arrivals stay in the minutes; the lock
-- leaves none to another fold), the totals go, to be made again by tally_recount.
DELETE FROM {schema}.tally_totals;

-- name: tally_recount
-- A full count of the final states (the one read that costs the history: on request only).
INSERT INTO {schema}.tally_totals (subject, name, state, n)
SELECT 'job', queue, state, count(*) FROM {schema}.jobs
WHERE state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
GROUP BY queue, state
UNION ALL
SELECT 'signal', signal_type, status, count(*) FROM {schema}.signals
WHERE status IN ('COMPLETED', 'DEAD')
GROUP BY signal_type, status
RETURNING n;
