-- Leader leases: one row per named role, held by one process until it expires.

CREATE TABLE {schema}.leases (
    name        text        PRIMARY KEY,
    holder      text        NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
