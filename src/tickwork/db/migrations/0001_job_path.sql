-- The job path: jobs, their executions (attempts, carrying the lease), the audit trail and
-- the live worker registry. "{schema}" is replaced by the configured schema name.

CREATE TABLE {schema}.jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue               text        NOT NULL,
    task                text        NOT NULL,
    args                jsonb       NOT NULL DEFAULT '{}',
    state               text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'DEAD_LETTER')),
    priority            smallint    NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100),
    attempts            integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        integer     NOT NULL CHECK (max_attempts >= 1),
    run_at              timestamptz NOT NULL DEFAULT now(),
    timeout             double precision CHECK (timeout > 0),
    unique_key          text,
    result              jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    created_by          text        NOT NULL,
    cancel_requested_at timestamptz,
    finished_at         timestamptz
);

-- The claim scans only runnable jobs, in claim order.
CREATE INDEX jobs_runnable_idx ON {schema}.jobs (queue, priority DESC, run_at, id)
    WHERE state IN ('PENDING', 'FAILED');

-- unique_key dedupes while a job with the key may still run.
CREATE UNIQUE INDEX jobs_unique_key_idx ON {schema}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('PENDING', 'FAILED', 'RUNNING');

-- Retention deletes finished jobs oldest first.
CREATE INDEX jobs_finished_idx ON {schema}.jobs (finished_at) WHERE finished_at IS NOT NULL;

-- Keyed by (job_id, id): the one index that serves both "this attempt" and "the attempts of
-- this job", so an attempt costs two index entries (this and the live-attempt index).
CREATE TABLE {schema}.executions (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    -- No foreign key: its check would lock the job row on every claim. Executions are
    -- written only by statements that have just read or locked their job, and deleted with it.
    job_id           bigint      NOT NULL,
    attempt          integer     NOT NULL,
    worker_id        uuid        NOT NULL,
    state            text        NOT NULL DEFAULT 'RUNNING'
        CHECK (state IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT', 'RELEASED')),
    started_at       timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz NOT NULL,
    finished_at      timestamptz,
    error            jsonb,
    PRIMARY KEY (job_id, id)
);

-- Exclusivity enforced by the database: a job never has two live attempts. The watchdog
-- scans this index too: it holds only live attempts (at most the workers' total
-- concurrency), so lease_expires_at needs no index of its own, and lease renewals, which
-- change nothing else, stay HOT updates (fillfactor leaves room on the page for them).
CREATE UNIQUE INDEX executions_one_live_idx ON {schema}.executions (job_id)
    WHERE state = 'RUNNING';

ALTER TABLE {schema}.executions SET (fillfactor = 90);

CREATE TABLE {schema}.audit_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    event_type  text        NOT NULL,
    target_type text        NOT NULL,
    target_id   text        NOT NULL,
    metadata    jsonb       NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_events_target_idx ON {schema}.audit_events (target_type, target_id, id);
CREATE INDEX audit_events_time_idx ON {schema}.audit_events (occurred_at);

CREATE TABLE {schema}.workers (
    id           uuid        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    queues       text[]      NOT NULL,
    concurrency  integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz
);
