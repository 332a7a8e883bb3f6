-- Times Python cannot read (PostgreSQL's 'infinity' and '-infinity') are refused in the
-- tables the claim, the scheduler and the pages read. A job stored by SQL with run_at =
-- '-infinity' made every claim of its queue fail (now() - run_at is out of range on
-- PostgreSQL before 17) and its page answer 500; tickwork never writes one itself.
-- NOT VALID: the rows already stored are not scanned (the lock is taken for a moment, the
-- table is not read); every row written from now on is checked. isfinite(NULL) is NULL,
-- which a CHECK lets pass: an unset time stays allowed.
ALTER TABLE {schema}.jobs ADD CONSTRAINT jobs_times_finite
    CHECK (isfinite(run_at) AND isfinite(created_at) AND isfinite(cancel_requested_at)
           AND isfinite(finished_at) AND isfinite(fire_time)) NOT VALID;
ALTER TABLE {schema}.executions ADD CONSTRAINT executions_times_finite
    CHECK (isfinite(started_at) AND isfinite(lease_expires_at) AND isfinite(finished_at))
    NOT VALID;
ALTER TABLE {schema}.schedules ADD CONSTRAINT schedules_times_finite
    CHECK (isfinite(next_run_at) AND isfinite(last_fire_at)) NOT VALID;
