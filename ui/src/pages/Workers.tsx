import { useQuery } from "@tanstack/react-query";
import { CartesianGrid, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { api } from "../api";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { Time } from "../time";
import type { Worker } from "../types";

interface Sample {
  sampled_at: string;
  cpu_percent: number;
  rss_bytes: number;
  children_rss_bytes: number;
}

function Usage({ worker }: { worker: Worker }) {
  const samples = useQuery({
    queryKey: ["samples", worker.id],
    queryFn: () => {
      const from = new Date(Date.now() - 3600_000).toISOString();
      return api<{ items: Sample[] }>(
        `/api/workers/metrics?worker_id=${worker.id}&from=${from}&limit=500`,
      );
    },
    refetchInterval: 30_000,
  });
  if (samples.isPending) return <Loading what="samples" />;
  if (samples.isError) return <Failure error={samples.error} />;
  const points = [...samples.data.items].reverse().map((s) => ({
    at: new Date(s.sampled_at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }),
    cpu: Math.round(s.cpu_percent),
    memory: Math.round((s.rss_bytes + s.children_rss_bytes) / 1048576),
  }));
  if (points.length === 0) return <Empty>No CPU or memory sample in the last hour yet.</Empty>;
  return (
    <figure className="chart">
      <figcaption>
        CPU (% of one core) and memory (MiB, with its scripts) over the last hour
      </figcaption>
      <ResponsiveContainer width="100%" height={180}>
        <LineChart data={points} margin={{ top: 8, right: 16, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="at" />
          <YAxis yAxisId="cpu" />
          <YAxis yAxisId="memory" orientation="right" />
          <Tooltip />
          <Line yAxisId="cpu" dataKey="cpu" name="CPU %" stroke="#0b57d0" dot={false} />
          <Line yAxisId="memory" dataKey="memory" name="MiB" stroke="#8e24aa" dot={false} />
        </LineChart>
      </ResponsiveContainer>
    </figure>
  );
}

export function WorkersPage() {
  const workers = useQuery({
    queryKey: ["workers"],
    queryFn: () => api<Worker[]>("/api/workers"),
    refetchInterval: live,
  });
  return (
    <section aria-labelledby="workers-page-title">
      <h1 id="workers-page-title">Workers</h1>
      {workers.isPending ? (
        <Loading what="workers" />
      ) : workers.isError ? (
        <Failure error={workers.error} />
      ) : workers.data.length === 0 ? (
        <Empty>No worker is running: start one with `tickwork worker --app module:app`.</Empty>
      ) : (
        workers.data.map((w) => (
          <article key={w.id} className="card spaced" aria-label={`Worker ${w.host}:${w.pid}`}>
            <h2>
              {w.host}:{w.pid}
            </h2>
            <p>
              {w.in_flight} of {w.concurrency} slots busy; queues {w.queues.join(", ")}; tasks{" "}
              {w.tasks.length}; started <Time value={w.started_at} />, last seen{" "}
              <Time value={w.last_seen_at} />
            </p>
            <Usage worker={w} />
          </article>
        ))
      )}
    </section>
  );
}
