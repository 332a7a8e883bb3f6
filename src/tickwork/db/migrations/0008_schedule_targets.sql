-- A stored schedule carries what its jobs take from the task's registration (queue,
-- priority, attempts, timeout), so the SCHEDULER lease holder enqueues them right even when
-- it does not have the task: a `serve` started without the application, or another
-- application's worker on the same schema. The process that defines or stores the schedule
-- writes them; NULL (every row from before) keeps the old rule: the lease holder's own
-- registration of the task, else the defaults. The schedule's own queue and priority, when
-- set, still come first.
ALTER TABLE {schema}.schedules
    ADD COLUMN task_queue        text,
    ADD COLUMN task_priority     smallint,
    ADD COLUMN task_max_attempts integer,
    ADD COLUMN task_timeout      double precision;

-- Which worker processes define a code schedule (their ids in the workers registry), so an
-- operator may delete one that no live process defines any more: the code that made it is
-- gone and cannot be changed instead. Empty for every row from before: deletable until a
-- process that defines it starts again and records itself.
ALTER TABLE {schema}.schedules ADD COLUMN defined_by uuid[] NOT NULL DEFAULT '{}';
