-- Signals with a reactor that failed (awaiting its retry, or DEAD): what `?status=FAILED`
-- lists. The index holds only those rows, so the listing costs what has failed, not the
-- history.
CREATE INDEX signal_reactor_status_failed_idx ON {schema}.signal_reactor_status (signal_id)
    WHERE status IN ('FAILED', 'DEAD');
