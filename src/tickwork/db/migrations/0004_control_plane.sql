-- The control plane: users and their credentials, operator state that must survive
-- restarts (paused queues, settings, variables), and the server's own secrets.

-- Emails are compared case-insensitively; the stored spelling is what the user typed.
CREATE TABLE {schema}.users (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email               text        NOT NULL,
    name                text        NOT NULL DEFAULT '',
    role                text        NOT NULL CHECK (role IN ('VIEWER', 'OPERATOR', 'ADMIN')),
    password_hash       text        NOT NULL,  -- argon2id, PHC string
    disabled            boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    last_login_at       timestamptz
);
CREATE UNIQUE INDEX users_email_idx ON {schema}.users (lower(email));

-- Refresh tokens are opaque and random; only their SHA-256 is stored. Each use rotates the
-- token (used_at set, a successor issued in the same family); presenting a used token again
-- is reuse, and revokes the whole family.
CREATE TABLE {schema}.refresh_tokens (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        bigint      NOT NULL REFERENCES {schema}.users (id) ON DELETE CASCADE,
    family         uuid        NOT NULL,
    token_hash     bytea       NOT NULL UNIQUE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    revoked_at     timestamptz,
    revoked_reason text
);
CREATE INDEX refresh_tokens_family_idx ON {schema}.refresh_tokens (family);
CREATE INDEX refresh_tokens_user_idx ON {schema}.refresh_tokens (user_id)
    WHERE revoked_at IS NULL;

-- Personal API tokens for automation: shown once, stored hashed, role never above the
-- owner's (checked when created and again on every use).
CREATE TABLE {schema}.api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES {schema}.users (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('VIEWER', 'OPERATOR', 'ADMIN')),
    token_hash   bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_user_idx ON {schema}.api_tokens (user_id);

-- Invites: a one-time token (stored hashed) with the role fixed when the invite is made.
CREATE TABLE {schema}.invites (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email       text        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('VIEWER', 'OPERATOR', 'ADMIN')),
    token_hash  bytea       NOT NULL UNIQUE,
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    user_id     bigint      REFERENCES {schema}.users (id) ON DELETE SET NULL,
    revoked_at  timestamptz
);

-- Failed logins, counted per account and per client address over a sliding window.
CREATE TABLE {schema}.login_failures (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email       text        NOT NULL,
    address     text        NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_idx ON {schema}.login_failures (lower(email), occurred_at);
CREATE INDEX login_failures_address_idx ON {schema}.login_failures (address, occurred_at);

-- A paused queue is not claimed from; the pause survives restarts.
CREATE TABLE {schema}.queues (
    name       text        PRIMARY KEY,
    paused     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL
);

-- Operator-editable settings (ADMIN), e.g. retention windows.
CREATE TABLE {schema}.app_settings (
    key        text        PRIMARY KEY,
    value      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL
);

-- Values shared across jobs. A secret variable's value is never returned once stored.
CREATE TABLE {schema}.variables (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    secret     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL
);

-- The server's own secrets (the token signing key when none is configured). No API reads
-- this table.
CREATE TABLE {schema}.secrets (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Audit listing filters by actor and event type, newest first.
CREATE INDEX audit_events_actor_idx ON {schema}.audit_events (actor, id);
