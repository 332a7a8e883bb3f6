-- Schedules: cron + time zone rows that the scheduler tick turns into jobs. Jobs remember
-- the schedule and fire time they came from; one job per (schedule, fire time), ever.

CREATE TABLE {schema}.schedules (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL UNIQUE,
    task         text        NOT NULL,
    args         jsonb       NOT NULL DEFAULT '{}',
    cron         text        NOT NULL,
    timezone     text        NOT NULL DEFAULT 'UTC',
    queue        text,
    priority     smallint,
    misfire      text        NOT NULL DEFAULT 'ONCE' CHECK (misfire IN ('ONCE', 'ALL', 'SKIP')),
    misfire_limit integer    NOT NULL DEFAULT 100 CHECK (misfire_limit >= 1),
    overlap      text        NOT NULL DEFAULT 'ALLOW' CHECK (overlap IN ('ALLOW', 'SKIP')),
    enabled      boolean     NOT NULL DEFAULT true,
    paused       boolean     NOT NULL DEFAULT false,
    next_run_at  timestamptz NOT NULL,
    last_fire_at timestamptz,
    origin       text        NOT NULL DEFAULT 'code',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX schedules_due_idx ON {schema}.schedules (next_run_at) WHERE enabled AND NOT paused;

ALTER TABLE {schema}.jobs ADD COLUMN schedule_id bigint, ADD COLUMN fire_time timestamptz;

CREATE UNIQUE INDEX jobs_schedule_fire_idx ON {schema}.jobs (schedule_id, fire_time)
    WHERE schedule_id IS NOT NULL;
