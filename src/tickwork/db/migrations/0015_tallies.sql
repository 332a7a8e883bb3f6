-- Tallies: what operators' periodic reads (queue stats, /metrics, signal stats, throughput
-- charts) know of finished work, without counting the history tables on every read.
--
-- Every statement that moves a job into or out of a finished state (SUCCEEDED, CANCELLED,
-- DEAD_LETTER; and FAILED, an attempt that failed with a retry due) or a signal into or
-- out of COMPLETED or DEAD appends one row per (name, state) to `tallies`, in the same
-- statement: +n for arrivals, -n for departures (a retried dead letter, retention). Only
-- inserts, so no completion ever waits on another for a counter row. The rollup pass
-- (every worker, a few seconds apart, SKIP LOCKED) folds them into `tally_totals` (what
-- the tables hold now, per name and state) and `tally_minutes` (arrivals per minute, the
-- throughput charts; kept for retention.throughput_after). A read sums the folded rows and
-- the few not yet folded, in one snapshot: exact at any moment.
--
-- subject: 'job' (name = the queue) or 'signal' (name = the signal type).
CREATE TABLE {schema}.tallies (
    subject text        NOT NULL,
    name    text        NOT NULL,
    state   text        NOT NULL,
    minute  timestamptz NOT NULL,  -- of the database clock, when it happened
    delta   integer     NOT NULL
);

CREATE TABLE {schema}.tally_totals (
    subject text   NOT NULL,
    name    text   NOT NULL,
    state   text   NOT NULL,  -- a final state only: FAILED is live, counted from its index
    n       bigint NOT NULL,
    PRIMARY KEY (subject, name, state)
);

CREATE TABLE {schema}.tally_minutes (
    subject text        NOT NULL,
    minute  timestamptz NOT NULL,
    name    text        NOT NULL,
    state   text        NOT NULL,
    n       bigint      NOT NULL,
    PRIMARY KEY (subject, minute, name, state)
);

-- What the tables hold now, and the minutes of the last day that their rows still show.
INSERT INTO {schema}.tally_totals (subject, name, state, n)
SELECT 'job', queue, state, count(*) FROM {schema}.jobs
WHERE state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
GROUP BY queue, state;

INSERT INTO {schema}.tally_totals (subject, name, state, n)
SELECT 'signal', signal_type, status, count(*) FROM {schema}.signals
WHERE status IN ('COMPLETED', 'DEAD')
GROUP BY signal_type, status;

INSERT INTO {schema}.tally_minutes (subject, minute, name, state, n)
SELECT 'job', date_trunc('minute', finished_at), queue, state, count(*) FROM {schema}.jobs
WHERE state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
  AND finished_at >= now() - interval '1 day'
GROUP BY 2, 3, 4;

INSERT INTO {schema}.tally_minutes (subject, minute, name, state, n)
SELECT 'signal', date_trunc('minute', processed_at), signal_type, status, count(*)
FROM {schema}.signals
WHERE status IN ('COMPLETED', 'DEAD') AND processed_at >= now() - interval '1 day'
GROUP BY 2, 3, 4;

-- Live states are counted from the partial indexes that hold only them; RUNNING jobs have
-- none of their own (their live executions do: executions_one_live_idx). Signals' PENDING
-- and PROCESSING are counted through signals_ready_idx and signals_processing_idx.

-- The live workers (worker_list) and the ones still recent enough to name the fleet's
-- tasks: read by started_at among those not stopped; retention deletes old rows.
CREATE INDEX workers_last_seen_idx ON {schema}.workers (last_seen_at);
