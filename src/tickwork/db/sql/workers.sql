-- The live worker registry: one row per worker process.

-- name: worker_register
INSERT INTO {schema}.workers (id, host, pid, queues, concurrency)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s);

-- name: worker_heartbeat
UPDATE {schema}.workers SET last_seen_at = now() WHERE id = %(id)s;

-- name: worker_stop
UPDATE {schema}.workers SET stopped_at = now(), last_seen_at = now() WHERE id = %(id)s;
