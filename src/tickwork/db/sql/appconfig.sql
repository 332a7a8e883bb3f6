-- Statements on operator-editable state: app settings and global variables.

-- name: app_setting_list
SELECT key, value, updated_at, updated_by FROM {schema}.app_settings ORDER BY key;

-- name: app_setting_put
-- Store a setting, with its audit event (old and new value) in the same statement.
WITH previous AS (
    SELECT value FROM {schema}.app_settings WHERE key = %(key)s
), stored AS (
    INSERT INTO {schema}.app_settings AS s (key, value, updated_by)
    VALUES (%(key)s, %(value)s::jsonb, %(actor)s)
    ON CONFLICT (key) DO UPDATE
    SET value = EXCLUDED.value, updated_at = now(), updated_by = EXCLUDED.updated_by
    RETURNING s.*
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'setting.changed', 'setting', s.key,
           jsonb_build_object('from', (SELECT value FROM previous), 'to', s.value)
    FROM stored s
)
SELECT key, value, updated_at, updated_by FROM stored;

-- name: variable_list
-- A secret variable's value never leaves the database through this statement.
SELECT name, CASE WHEN secret THEN NULL ELSE value END AS value, secret, updated_at, updated_by
FROM {schema}.variables
ORDER BY name;

-- name: variable_put
-- Store a variable; the audit event records that it changed, never its value.
WITH stored AS (
    INSERT INTO {schema}.variables AS v (name, value, secret, updated_by)
    VALUES (%(name)s, %(value)s, %(secret)s, %(actor)s)
    ON CONFLICT (name) DO UPDATE
    SET value = EXCLUDED.value, secret = EXCLUDED.secret, updated_at = now(),
        updated_by = EXCLUDED.updated_by
    RETURNING v.*
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'variable.set', 'variable', s.name, jsonb_build_object('secret', s.secret)
    FROM stored s
)
SELECT name, CASE WHEN secret THEN NULL ELSE value END AS value, secret, updated_at, updated_by
FROM stored;

-- name: variable_delete
WITH gone AS (
    DELETE FROM {schema}.variables WHERE name = %(name)s RETURNING name
), audit AS (
    INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
    SELECT %(actor)s, 'variable.deleted', 'variable', g.name, '{}'::jsonb FROM gone g
)
SELECT name FROM gone;

-- name: variable_values
-- The variables a run references, with their values (secret ones too: the runtime masks
-- them in whatever it stores). Never served by the API.
SELECT name, value, secret FROM {schema}.variables WHERE name = ANY(%(names)s::text[]);
