-- Statements on the audit trail (append-only).

-- name: audit_list_for_target
SELECT * FROM {schema}.audit_events
WHERE target_type = %(target_type)s AND target_id = %(target_id)s
ORDER BY id;
