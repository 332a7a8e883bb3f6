-- Statements on the audit trail (append-only).

-- name: audit_list_for_target
SELECT * FROM {schema}.audit_events
WHERE target_type = %(target_type)s AND target_id = %(target_id)s
ORDER BY id;

-- name: audit_append
-- One event on the trail; occurred_at is the database's clock.
INSERT INTO {schema}.audit_events (actor, event_type, target_type, target_id, metadata)
VALUES (%(actor)s, %(event_type)s, %(target_type)s, %(target_id)s, %(metadata)s::jsonb)
RETURNING *;
