-- The migrator's own bookkeeping.

-- name: migration_lock
-- Session-level advisory lock: concurrent migrators (several processes starting at once)
-- apply the files one after another; the second finds nothing left to do.
SELECT pg_advisory_lock(hashtext('tickwork.migrate.' || %(schema)s));

-- name: migration_unlock
SELECT pg_advisory_unlock(hashtext('tickwork.migrate.' || %(schema)s));

-- name: migration_create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: migration_create_table
CREATE TABLE IF NOT EXISTS {schema}.migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_applied
SELECT version FROM {schema}.migrations ORDER BY version;

-- name: migration_record
INSERT INTO {schema}.migrations (version, name) VALUES (%(version)s, %(name)s);
