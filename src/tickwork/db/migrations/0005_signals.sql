-- Signals and sweeps: domain signals (debounced by squash-on-emit), their delivery to each
-- reactor, and the record of sweep runs. Leader leases (SIGNAL_MASTER, SWEEP_MASTER) live
-- in the existing leases table.

CREATE TABLE {schema}.signals (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    signal_type     text        NOT NULL,
    entity_type     text,
    entity_id       text,
    aggregate_key   text,        -- the squash key; NULL for zero-window types (never squashed)
    payload         jsonb,       -- replaced by the latest emit on squash: not a history
    organisation_id text,        -- routing and filtering; not a security boundary
    status          text        NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'PROCESSING', 'COMPLETED', 'DEAD')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    process_after   timestamptz NOT NULL,  -- the debounce deadline; squashing slides it
    updated_at      timestamptz,           -- the last squash
    claimed_at      timestamptz,           -- when a processor last took it up
    processed_at    timestamptz,
    error_message   text,
    retry_count     integer     NOT NULL DEFAULT 0,  -- processor recoveries (see below)
    max_retries     integer     NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    next_retry_at   timestamptz            -- a reactor's retry is due (status PROCESSING)
);

-- Squash identity: at most one PENDING signal per (type, key). Emit upserts against it.
CREATE UNIQUE INDEX signals_pending_squash_idx ON {schema}.signals (signal_type, aggregate_key)
    WHERE status = 'PENDING';

-- The processor's scan: matured pending signals, oldest deadline first.
CREATE INDEX signals_ready_idx ON {schema}.signals (process_after) WHERE status = 'PENDING';

-- Signals in flight (retries due, or left behind by a processor that died).
CREATE INDEX signals_processing_idx ON {schema}.signals (claimed_at)
    WHERE status = 'PROCESSING';

-- Admin listing and retention.
CREATE INDEX signals_status_created_idx ON {schema}.signals (status, created_at);
CREATE INDEX signals_entity_idx ON {schema}.signals (entity_type, entity_id);

-- Delivery per reactor: a retry re-invokes only the reactors that did not complete.
CREATE TABLE {schema}.signal_reactor_status (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    signal_id     bigint      NOT NULL REFERENCES {schema}.signals (id) ON DELETE CASCADE,
    reactor_name  text        NOT NULL,
    status        text        NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'DEAD')),
    dry_run       boolean     NOT NULL DEFAULT false,  -- completed in dry-run: no side effects
    processed_at  timestamptz,
    error_message text,
    retry_count   integer     NOT NULL DEFAULT 0,
    next_retry_at timestamptz,
    UNIQUE (signal_id, reactor_name)
);

-- One row per sweep run (manual or scheduled), for the admin API's "last sweep".
CREATE TABLE {schema}.sweep_runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reactor_name text        NOT NULL,
    holder       text        NOT NULL,
    trigger      text        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    dry_run      boolean     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    outcome      text        CHECK (outcome IN ('COMPLETED', 'FAILED', 'SKIPPED')),
    error        text
);
CREATE INDEX sweep_runs_reactor_idx ON {schema}.sweep_runs (reactor_name, id);
