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

-- name: audit_list
-- Operators' audit listing: every filter optional (NULL = not filtering), newest first,
-- keyset-paginated by id.
SELECT * FROM {schema}.audit_events
WHERE (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(event_type)s::text IS NULL OR event_type = %(event_type)s)
  AND (%(target_type)s::text IS NULL OR target_type = %(target_type)s)
  AND (%(target_id)s::text IS NULL OR target_id = %(target_id)s)
  AND (%(occurred_from)s::timestamptz IS NULL OR occurred_at >= %(occurred_from)s)
  AND (%(occurred_to)s::timestamptz IS NULL OR occurred_at < %(occurred_to)s)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: audit_prune
-- Audit events older than the window (seconds), a batch at a time (retention).
DELETE FROM {schema}.audit_events
WHERE id IN (
    SELECT id FROM {schema}.audit_events
    WHERE occurred_at < now() - make_interval(secs => %(older_than)s)
    LIMIT %(limit)s
)
RETURNING 1;
