-- Identity: users, refresh tokens, API tokens, invites, failed logins and the server's own
-- secrets. Opaque tokens are looked up by their SHA-256 (token_hash); the token itself is
-- never stored. Durations arrive as seconds (float) and are applied on the database clock.

-- name: auth_lock
-- Serialise one kind of identity change across processes (first-admin bootstrap; changes
-- that could leave no enabled administrator) until the end of the current transaction.
SELECT pg_advisory_xact_lock(hashtextextended('{schema}.auth.' || %(name)s, 0));

-- name: secret_put_if_absent
-- The first process to start stores its generated value; later ones keep what is there.
INSERT INTO {schema}.secrets (name, value)
VALUES (%(name)s, %(value)s)
ON CONFLICT (name) DO NOTHING;

-- name: secret_get
-- Read after secret_put_if_absent, as a statement of its own, so it sees the value of a
-- process that won a concurrent insert.
SELECT value FROM {schema}.secrets WHERE name = %(name)s;

-- name: user_any
SELECT EXISTS (SELECT 1 FROM {schema}.users) AS any;

-- name: user_insert
-- No row back when the email is taken (compared case-insensitively, by users_email_idx).
INSERT INTO {schema}.users (email, name, role, password_hash)
VALUES (%(email)s, %(name)s, %(role)s, %(password_hash)s)
ON CONFLICT ((lower(email))) DO NOTHING
RETURNING *;

-- name: user_get
SELECT * FROM {schema}.users WHERE id = %(user_id)s;

-- name: user_get_by_email
SELECT * FROM {schema}.users WHERE lower(email) = lower(%(email)s);

-- name: user_list
SELECT * FROM {schema}.users ORDER BY id;

-- name: user_lock
-- Hold a user's row (FOR SHARE) to the end of the caller's transaction: the acting user's,
-- before a change it makes to users, invites or tokens. A role change or disable of that user
-- (an UPDATE of the row) then waits for the change to commit, or commits first and is seen by
-- actor_authority after this (a statement of its own: in READ COMMITTED a fresh snapshot).
-- Taken after auth_lock, before any other user's row: one order for every such transaction.
SELECT id FROM {schema}.users WHERE id = %(user_id)s FOR SHARE;

-- name: actor_authority
-- What the acting user may do now (read under user_lock): role, disabled, whether the login
-- session of the request still stands (NULL family: not a session) and the live role of the
-- API token it came with (NULL token_id, or a token revoked or expired: NULL).
SELECT u.role, u.disabled,
       (%(family)s::uuid IS NULL
        OR EXISTS (SELECT 1 FROM {schema}.refresh_tokens t
                   WHERE t.family = %(family)s::uuid AND t.user_id = u.id
                     AND t.revoked_at IS NULL)) AS session_live,
       (SELECT t.role FROM {schema}.api_tokens t
        WHERE t.id = %(token_id)s::bigint AND t.user_id = u.id
          AND t.revoked_at IS NULL                             -- a revoked token acts no more
          AND (t.expires_at IS NULL OR t.expires_at > now())   -- nor an expired one
       ) AS token_role
FROM {schema}.users u
WHERE u.id = %(user_id)s;

-- name: user_login_succeeded
-- Record a successful login, storing the password's new hash when it was rehashed.
UPDATE {schema}.users
SET last_login_at = now(),
    password_hash = coalesce(%(new_hash)s, password_hash),
    updated_at = CASE WHEN %(new_hash)s::text IS NULL THEN updated_at ELSE now() END
WHERE id = %(user_id)s
  AND NOT disabled  -- disabled between the password check and now: no session
RETURNING *;

-- name: user_set_role
-- Change a role, refusing the change that would leave no enabled administrator (callers
-- hold auth_lock('admins') so two such changes cannot both pass the check).
UPDATE {schema}.users u
SET role = %(role)s, updated_at = now()
WHERE u.id = %(user_id)s
  AND (%(role)s = 'ADMIN'
       OR EXISTS (SELECT 1 FROM {schema}.users o  -- another enabled admin remains
                  WHERE o.role = 'ADMIN' AND NOT o.disabled AND o.id <> u.id))
RETURNING u.*;

-- name: user_set_disabled
-- Disable or re-enable, refusing to disable the last enabled administrator (callers hold
-- auth_lock('admins')).
UPDATE {schema}.users u
SET disabled = %(disabled)s, updated_at = now()
WHERE u.id = %(user_id)s
  AND (NOT %(disabled)s
       OR u.role <> 'ADMIN'
       OR EXISTS (SELECT 1 FROM {schema}.users o  -- another enabled admin remains
                  WHERE o.role = 'ADMIN' AND NOT o.disabled AND o.id <> u.id))
RETURNING u.*;

-- name: user_set_password_hash
-- Compare-and-set on the hash the old password was checked against: of two concurrent
-- changes, the second finds the hash changed and fails.
UPDATE {schema}.users
SET password_hash = %(new_hash)s, updated_at = now()
WHERE id = %(user_id)s
  AND password_hash = %(old_hash)s  -- the old password was verified against this hash
RETURNING *;

-- name: login_attempt_lock
-- Password attempts on one account, and from one client address, take turns at the throttle
-- (login_attempt_reserve, same transaction): without this, parallel attempts would all be
-- counted before any of them is recorded. The account's lock is always taken before the
-- address's, so two attempts never wait for each other in a cycle.
SELECT pg_advisory_xact_lock(hashtextextended('{schema}.login.account:' || lower(%(email)s), 0)),
       pg_advisory_xact_lock(hashtextextended('{schema}.login.address:' || %(address)s, 0));

-- name: login_attempt_reserve
-- The throttle, under login_attempt_lock. Seconds until each counter lets an attempt through
-- (NULL: it does already). A counter is at its maximum when the failures inside the window,
-- with the attempts whose password check is still running, reach it; the wait is then until
-- the max-th newest settled failure leaves the window, or a moment (check_retry_after) when
-- only running checks make up the count. Below both maximums this attempt is counted as a
-- failure before its password is checked (reserved_id, marked checking): settled by
-- login_attempt_fail or forgiven by login_attempt_forgive. A check still marked after
-- check_timeout died with its process and counts as a failure. Failures that have left the
-- window are dropped (they are never counted again).
WITH counted AS (
    SELECT lower(f.email) = lower(%(email)s) AS on_account,
           f.address = %(address)s AS from_address,
           f.occurred_at,
           f.checking AND f.occurred_at > now() - make_interval(secs => %(check_timeout)s)
               AS running  -- its password check has not ended yet
    FROM {schema}.login_failures f
    WHERE (lower(f.email) = lower(%(email)s) OR f.address = %(address)s)
      AND f.occurred_at > now() - make_interval(secs => %(window)s)  -- inside the window
), waits AS (
    SELECT
        CASE WHEN (SELECT count(*) FROM counted WHERE on_account) >= %(max_per_account)s THEN
            coalesce((SELECT extract(epoch FROM c.occurred_at
                                                + make_interval(secs => %(window)s) - now())
                      FROM counted c WHERE c.on_account AND NOT c.running
                      ORDER BY c.occurred_at DESC
                      OFFSET %(max_per_account)s - 1 LIMIT 1),
                     %(check_retry_after)s)
        END::float8 AS account_retry_after,
        CASE WHEN (SELECT count(*) FROM counted WHERE from_address) >= %(max_per_address)s THEN
            coalesce((SELECT extract(epoch FROM c.occurred_at
                                                + make_interval(secs => %(window)s) - now())
                      FROM counted c WHERE c.from_address AND NOT c.running
                      ORDER BY c.occurred_at DESC
                      OFFSET %(max_per_address)s - 1 LIMIT 1),
                     %(check_retry_after)s)
        END::float8 AS address_retry_after
), reserved AS (
    INSERT INTO {schema}.login_failures (email, address, checking)
    SELECT %(email)s, %(address)s, true FROM waits
    WHERE account_retry_after IS NULL AND address_retry_after IS NULL  -- not throttled
    RETURNING id
), pruned AS (
    DELETE FROM {schema}.login_failures
    WHERE (lower(email) = lower(%(email)s) OR address = %(address)s)
      AND occurred_at <= now() - make_interval(secs => %(window)s)  -- outside the window
)
SELECT w.account_retry_after, w.address_retry_after, (SELECT id FROM reserved) AS reserved_id
FROM waits w;

-- name: login_attempt_fail
-- The password was wrong (or the account disabled): the reserved attempt is a settled failure.
UPDATE {schema}.login_failures SET checking = false WHERE id = %(reserved_id)s;

-- name: login_attempt_forgive
-- The password was right: the attempt reserved as a failure does not count.
DELETE FROM {schema}.login_failures WHERE id = %(reserved_id)s;

-- name: refresh_token_insert
-- A refresh token starting a new family (a login) or continuing one.
INSERT INTO {schema}.refresh_tokens (user_id, family, token_hash, expires_at)
VALUES (%(user_id)s, %(family)s, %(token_hash)s, now() + make_interval(secs => %(ttl)s))
RETURNING id, family, expires_at;

-- name: refresh_token_rotate
-- Use a refresh token once: mark it used and issue its successor in the same family, in
-- one statement. The UPDATE locks the row, so of two concurrent rotations the second waits,
-- re-checks used_at, and gets no row: exactly one wins. No row back means the token is
-- unknown, used, revoked or expired, or its user is disabled. The owner's row is locked
-- FOR SHARE first: a password change, role change or disable (which update that row, then
-- revoke the user's tokens) waits for this rotation and then revokes its successor too, or
-- runs first and this rotation finds the token revoked (or the user disabled).
WITH owner AS (
    SELECT u.id FROM {schema}.users u
    JOIN {schema}.refresh_tokens t ON t.user_id = u.id
    WHERE t.token_hash = %(token_hash)s
    FOR SHARE OF u
), used AS (
    UPDATE {schema}.refresh_tokens t
    SET used_at = now()
    FROM {schema}.users u
    WHERE t.token_hash = %(token_hash)s
      AND u.id = t.user_id
      AND u.id = (SELECT id FROM owner)
      AND t.used_at IS NULL         -- a used token presented again is reuse
      AND t.revoked_at IS NULL      -- logout, reuse or a credential change ended the family
      AND t.expires_at > now()      -- an expired token starts nothing
      AND NOT u.disabled            -- a disabled user gets no new session
    RETURNING t.user_id, t.family
), successor AS (
    INSERT INTO {schema}.refresh_tokens (user_id, family, token_hash, expires_at)
    SELECT user_id, family, %(new_hash)s, now() + make_interval(secs => %(ttl)s)
    FROM used
    RETURNING user_id, family
)
SELECT u.*, s.family AS session FROM successor s JOIN {schema}.users u ON u.id = s.user_id;

-- name: refresh_family_revoke_reused
-- After a failed rotation: if the presented token had been used (stolen and replayed, or
-- the loser of a concurrent rotation) revoke its whole family, successors included. One
-- row back (the token's user and family) when it was reuse; none otherwise.
WITH presented AS (
    SELECT t.user_id, t.family, u.email
    FROM {schema}.refresh_tokens t JOIN {schema}.users u ON u.id = t.user_id
    WHERE t.token_hash = %(token_hash)s
      AND t.used_at IS NOT NULL     -- used before: this presentation is reuse
), revoked AS (
    UPDATE {schema}.refresh_tokens t
    SET revoked_at = now(), revoked_reason = 'reuse'
    FROM presented p
    WHERE t.family = p.family
      AND t.revoked_at IS NULL      -- keep the first revocation's time and reason
    RETURNING t.id
)
SELECT p.user_id, p.email, p.family, (SELECT count(*) FROM revoked) AS revoked
FROM presented p;

-- name: refresh_family_revoke
-- Logout: end the family of the presented token (any token of it, used or not).
WITH presented AS (
    SELECT family FROM {schema}.refresh_tokens WHERE token_hash = %(token_hash)s
)
UPDATE {schema}.refresh_tokens t
SET revoked_at = now(), revoked_reason = %(reason)s
FROM presented p, {schema}.users u
WHERE t.family = p.family
  AND u.id = t.user_id
  AND t.revoked_at IS NULL          -- keep the first revocation's time and reason
RETURNING t.user_id, u.email, t.family;

-- name: refresh_tokens_revoke_for_user
-- A credential or authority change ends every session of the user.
UPDATE {schema}.refresh_tokens
SET revoked_at = now(), revoked_reason = %(reason)s
WHERE user_id = %(user_id)s
  AND revoked_at IS NULL;           -- keep the first revocation's time and reason

-- name: api_token_insert
INSERT INTO {schema}.api_tokens (user_id, name, role, token_hash, expires_at)
VALUES (
    %(user_id)s, %(name)s, %(role)s, %(token_hash)s,
    now() + make_interval(secs => %(expires_in)s::float8)  -- NULL expires_in: never expires
)
RETURNING *;

-- name: api_token_list
SELECT * FROM {schema}.api_tokens WHERE user_id = %(user_id)s ORDER BY id;

-- name: api_token_get
SELECT * FROM {schema}.api_tokens
WHERE id = %(token_id)s
  AND user_id = %(user_id)s;        -- only the owner's own token

-- name: api_token_revoke
UPDATE {schema}.api_tokens
SET revoked_at = now()
WHERE id = %(token_id)s
  AND user_id = %(user_id)s         -- only the owner's own token
  AND revoked_at IS NULL            -- revoking twice keeps the first time
RETURNING *;

-- name: api_token_authenticate
-- Use an API token: it must be live and its owner enabled; note the use. The owner's
-- current role comes back too, as the token never acts above it.
UPDATE {schema}.api_tokens t
SET last_used_at = now()
FROM {schema}.users u
WHERE t.token_hash = %(token_hash)s
  AND u.id = t.user_id
  AND t.revoked_at IS NULL                              -- revoked tokens are refused
  AND (t.expires_at IS NULL OR t.expires_at > now())    -- so are expired ones
  AND NOT u.disabled                                    -- and those of a disabled owner
RETURNING t.id, t.role, u.id AS user_id, u.email, u.role AS owner_role;

-- name: invite_insert
INSERT INTO {schema}.invites (email, role, token_hash, created_by, expires_at)
VALUES (%(email)s, %(role)s, %(token_hash)s, %(created_by)s,
        now() + make_interval(secs => %(ttl)s))
RETURNING *;

-- name: invite_get
SELECT * FROM {schema}.invites WHERE id = %(invite_id)s;

-- name: invite_list
SELECT * FROM {schema}.invites ORDER BY id DESC;

-- name: invite_revoke
UPDATE {schema}.invites
SET revoked_at = now()
WHERE id = %(invite_id)s
  AND accepted_at IS NULL           -- an accepted invite has done its work
  AND revoked_at IS NULL            -- revoking twice keeps the first time
RETURNING *;

-- name: invite_accept
-- Use an invite once. The row lock makes a concurrent second accept wait, re-check
-- accepted_at and get no row.
UPDATE {schema}.invites
SET accepted_at = now()
WHERE token_hash = %(token_hash)s
  AND accepted_at IS NULL           -- single use
  AND revoked_at IS NULL            -- a revoked invite is dead
  AND expires_at > now()            -- so is an expired one
RETURNING *;

-- name: invite_set_user
-- Link an accepted invite to the user it created (same transaction as invite_accept).
UPDATE {schema}.invites SET user_id = %(user_id)s WHERE id = %(invite_id)s;

-- name: session_check
-- Is an access token's session still good? Its user must exist, be enabled and hold the
-- role the token names, and its session (refresh token family) must not be revoked: a role
-- change, disable, password change, logout or refresh reuse revokes it. Read on every
-- request (cached per process for a second), so a revocation takes effect at once.
SELECT u.role, u.disabled,
       EXISTS (SELECT 1 FROM {schema}.refresh_tokens t
               WHERE t.family = %(family)s AND t.user_id = u.id
                 AND t.revoked_at IS NULL) AS live
FROM {schema}.users u
WHERE u.id = %(user_id)s;

-- name: session_changed_notify
-- Tell every API process to forget what it cached about this user's sessions (sent in the
-- revoking transaction: delivered when it commits, never for a rollback).
SELECT pg_notify('{schema}.sessions', %(user_id)s::text);
