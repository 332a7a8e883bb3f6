-- Definitions: HTTP calls and scripts that operators store at runtime (docs/definitions.md).
-- A definition's runs are ordinary jobs (task tickwork.http or tickwork.script) whose
-- arguments carry a snapshot of the definition as it was when the job was made, so an edit
-- applies from the next run on and never to a run in flight. A definition with a cron has
-- one schedule row (named "definition:<id>", origin "definition") kept in step with it in
-- the same transaction as every edit: the scheduler fires it like any other schedule.
CREATE TABLE {schema}.definitions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL UNIQUE,
    description  text        NOT NULL DEFAULT '',
    kind         text        NOT NULL CHECK (kind IN ('http', 'script')),
    spec         jsonb       NOT NULL,  -- the kind's own fields (url, method, ... / language, source)
    queue        text        NOT NULL,  -- the runtime's queue, from the kind and language
    cron         text,
    timezone     text        NOT NULL DEFAULT 'UTC',
    exec_timeout double precision NOT NULL CHECK (exec_timeout > 0 AND exec_timeout <= 1800),
    max_attempts integer     NOT NULL CHECK (max_attempts >= 1),
    backoff      jsonb       NOT NULL,
    loop         jsonb,
    enabled      boolean     NOT NULL DEFAULT true,
    webhook_hash bytea,                 -- SHA-256 of the webhook's token; NULL: no webhook
    runs         bigint      NOT NULL DEFAULT 0,  -- attempts ended, counted by the runtimes
    failures     bigint      NOT NULL DEFAULT 0,
    last_run_at  timestamptz,                     -- when the last attempt ended
    last_outcome text,                            -- its outcome: succeeded or failed
    version      integer     NOT NULL DEFAULT 1,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text        NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A definition's activity: its runs' attempts counted per minute (database clock),
-- written by the runtime worker as each attempt ends; the API sums buckets into charts.
-- Outlives the jobs (retention deletes those) for retention.activity_after (30 days).
CREATE TABLE {schema}.definition_activity (
    definition_id  bigint           NOT NULL,
    bucket         timestamptz      NOT NULL,
    runs           integer          NOT NULL DEFAULT 0,
    succeeded      integer          NOT NULL DEFAULT 0,
    failed         integer          NOT NULL DEFAULT 0,
    duration_total double precision NOT NULL DEFAULT 0,
    duration_max   double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (definition_id, bucket)
);
CREATE INDEX definition_activity_bucket_idx ON {schema}.definition_activity (bucket);
