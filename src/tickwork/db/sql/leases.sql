-- Leader leases (leases table): every holder competes with one statement per heartbeat.

-- name: lease_attempt_elect
-- Acquire or renew every named lease at once, each for its own time to live (ttls[i] seconds
-- for names[i]), on the database clock. A row is taken over
-- only when it is this holder's own or has expired; RETURNING lists exactly the leases this
-- holder holds now, with the database's now() so the caller can turn the expiry into a
-- local deadline that is never later than the real one.
INSERT INTO {schema}.leases AS l (name, holder, acquired_at, renewed_at, expires_at)
SELECT n.name, %(holder)s, now(), now(), now() + make_interval(secs => n.ttl)
FROM unnest(%(names)s::text[], %(ttls)s::float8[]) AS n(name, ttl)
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END,
    renewed_at = now(),
    expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder  -- renew our own
   OR l.expires_at < now()        -- or take over one its holder let lapse
RETURNING l.name, l.acquired_at, l.expires_at, now() AS db_now;

-- name: lease_release
-- Clean shutdown: give up our leases so another holder takes over at its next heartbeat.
DELETE FROM {schema}.leases WHERE holder = %(holder)s AND name = ANY(%(names)s::text[]);

-- name: lease_list
SELECT name, holder, acquired_at, renewed_at, expires_at, (expires_at > now()) AS live
FROM {schema}.leases
ORDER BY name;
