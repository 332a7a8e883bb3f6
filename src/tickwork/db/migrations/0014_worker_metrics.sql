-- Each tickwork process samples its CPU and memory (and its children's: scripts) on an
-- interval, for operators to see what the workers cost (GET /api/workers/metrics). Samples
-- are kept for retention.worker_metrics_after (7 days).
CREATE TABLE {schema}.worker_metrics (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id    uuid             NOT NULL,  -- the process's worker id (workers.id)
    host         text             NOT NULL,
    pid          integer          NOT NULL,
    roles        text             NOT NULL,  -- what the process runs: its roles and runtimes
    sampled_at   timestamptz      NOT NULL DEFAULT now(),
    cpu_percent  double precision NOT NULL,  -- of one core, since the previous sample
    rss_bytes    bigint           NOT NULL,  -- the process's resident memory
    children_rss_bytes bigint     NOT NULL   -- its children's (script processes)
);
CREATE INDEX worker_metrics_sampled_idx ON {schema}.worker_metrics (sampled_at);
CREATE INDEX worker_metrics_worker_idx ON {schema}.worker_metrics (worker_id, id);
