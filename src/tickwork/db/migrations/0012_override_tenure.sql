-- The overrides that still apply: those whose holder has held a signal lease without a
-- break since the override was set. A holder that lost both leases to another process and
-- took one back later starts a new tenure (the lease's acquired_at is newer than the
-- override), so what was set for its first tenure does not come back with it.
CREATE VIEW {schema}.signal_overrides_live AS
SELECT o.holder, o.switch, o.value, o.set_at
FROM {schema}.signal_overrides o
WHERE EXISTS (SELECT 1 FROM {schema}.leases l
              WHERE l.holder = o.holder AND l.expires_at > now()
                AND l.name IN ('SIGNAL_MASTER', 'SWEEP_MASTER')
                AND l.acquired_at <= o.set_at);
