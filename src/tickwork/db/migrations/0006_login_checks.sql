-- A login attempt is counted as a failure before its password is checked (so parallel
-- guesses cannot all slip under the limit); while its check runs it is marked `checking`.
-- Attempts over the limit only because of checks still running are told to retry in a
-- moment rather than to wait out the window (parallel right passwords are not failures).
ALTER TABLE {schema}.login_failures ADD COLUMN checking boolean NOT NULL DEFAULT false;
