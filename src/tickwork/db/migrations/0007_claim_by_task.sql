-- A worker claims only jobs of the tasks it has: a job of a task no live worker knows waits
-- (it is never failed as unknown by a process that merely shares its queue, such as an old
-- worker in a rolling deploy or a `serve` started without the application).
--
-- The claim reads one index range per (queue, task) pair the worker knows, so jobs of other
-- tasks waiting in front cost it nothing; the index leads with queue, so what reads a queue
-- alone still uses it.
DROP INDEX {schema}.jobs_runnable_idx;
CREATE INDEX jobs_runnable_idx ON {schema}.jobs (queue, task, priority DESC, run_at, id)
    WHERE state IN ('PENDING', 'FAILED');

-- What each worker can run, so operators see jobs that no live worker claims, and what its
-- tasks give their jobs ({"name": {"queue", "priority", "max_attempts", "timeout"}}), so a
-- process without the task (an API without the application) enqueues them as they expect.
ALTER TABLE {schema}.workers ADD COLUMN tasks text[] NOT NULL DEFAULT '{}',
    ADD COLUMN task_options jsonb NOT NULL DEFAULT '{}';
