-- Read-only views for operators: table health and what holds back vacuum.

-- name: health_tables
-- Size, dead tuples and HOT-update ratio of tickwork's tables.
SELECT c.relname AS table_name,
       s.n_live_tup AS live_tuples,
       s.n_dead_tup AS dead_tuples,
       s.n_tup_upd AS updates,
       s.n_tup_hot_upd AS hot_updates,
       pg_table_size(c.oid) AS table_bytes,
       pg_indexes_size(c.oid) AS index_bytes,
       greatest(s.last_autovacuum, s.last_vacuum) AS last_vacuum
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = %(schema)s AND c.relkind = 'r'
ORDER BY c.relname;

-- name: health_indexes
SELECT t.relname AS table_name, i.relname AS index_name, pg_relation_size(i.oid) AS bytes,
       s.idx_scan AS scans
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_stat_user_indexes s ON s.indexrelid = i.oid
WHERE n.nspname = %(schema)s
ORDER BY t.relname, i.relname;

-- name: health_xmin_horizon
-- The oldest snapshots in the cluster, oldest first: while it stays open, vacuum cannot remove the dead
-- rows finished jobs leave behind, in any table. Sessions, prepared transactions and
-- replication slots can each hold it.
SELECT *
FROM (
    SELECT 'session' AS holder,
           format('pid %%s (%%s, %%s, %%s)', pid, coalesce(usename::text, '?'),
                  coalesce(nullif(application_name, ''), '-'), state) AS detail,
           extract(epoch FROM now() - coalesce(xact_start, backend_start))::float8 AS age_seconds,
           greatest(age(backend_xmin), age(backend_xid)) AS xmin_age
    FROM pg_stat_activity
    -- a snapshot (backend_xmin) or an assigned transaction id (backend_xid) holds it back
    WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid()
    UNION ALL
    SELECT 'prepared transaction', gid,
           extract(epoch FROM now() - prepared)::float8, age(transaction)
    FROM pg_prepared_xacts
    UNION ALL
    SELECT 'replication slot', slot_name, NULL::float8, age(xmin)
    FROM pg_replication_slots
    WHERE xmin IS NOT NULL
) AS holders
ORDER BY xmin_age DESC NULLS LAST
LIMIT %(limit)s;

-- name: health_autovacuum
SELECT current_setting('autovacuum')::bool AS autovacuum;

-- name: connection_backend_pid
-- The server process of this session. A pooler answers the connection's startup with its own
-- key (not a server process id), so the two differ on a connection that goes through one.
SELECT pg_backend_pid() AS pid;
