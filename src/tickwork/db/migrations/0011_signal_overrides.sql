-- Runtime overrides of the signal switches, kept for the processes they apply to: the
-- holders of SIGNAL_MASTER and SWEEP_MASTER when they were set, by holder id. Any API
-- process can set one (and show it); the holder applies it. A restart or a new holder has
-- another holder id, so the overrides of before no longer apply (the seed's "lost on
-- restart"); rows of a holder that holds no live lease are deleted by the next write.
CREATE TABLE {schema}.signal_overrides (
    holder text        NOT NULL,
    switch text        NOT NULL,  -- processor, sweeps, enabled:<reactor>, dry_run:<reactor>,
                                  -- organisations:<reactor>
    value  jsonb       NOT NULL,
    set_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (holder, switch)
);

-- What a holder's configuration says (its switches and its reactors), published when it
-- first holds a signal lease, so that every process shows the holder's config, override
-- and effective value, not its own.
CREATE TABLE {schema}.signal_holder_config (
    holder       text        PRIMARY KEY,
    config       jsonb       NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);
