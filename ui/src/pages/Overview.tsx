import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import {
  Area,
  AreaChart,
  CartesianGrid,
  Legend,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";
import { api } from "../api";
import { useSession } from "../session";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { age, Time } from "../time";
import type { Health, Leader, QueueStats, Throughput, Worker } from "../types";

const HOUR = 3600 * 1000;

function ThroughputChart() {
  const chart = useQuery({
    queryKey: ["throughput", "hour"],
    queryFn: () => {
      const from = new Date(Date.now() - HOUR).toISOString();
      return api<Throughput>(`/api/queues/throughput?bucket=minute&from=${from}`);
    },
    refetchInterval: live,
  });
  if (chart.isPending) return <Loading what="throughput" />;
  if (chart.isError) return <Failure error={chart.error} />;
  const byMinute = new Map<string, { at: string; succeeded: number; failed: number }>();
  for (const b of chart.data.buckets) {
    const row = byMinute.get(b.at) ?? { at: b.at, succeeded: 0, failed: 0 };
    row.succeeded += b.succeeded;
    row.failed += b.failed + b.dead_letter;
    byMinute.set(b.at, row);
  }
  const points = [...byMinute.values()].map((p) => ({
    ...p,
    label: new Date(p.at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }),
  }));
  const finished = chart.data.succeeded + chart.data.failed + chart.data.dead_letter;
  const rate = finished ? (chart.data.failed + chart.data.dead_letter) / finished : 0;
  return (
    <figure className="chart">
      <figcaption>
        Last hour: {chart.data.succeeded.toLocaleString()} succeeded,{" "}
        {(chart.data.failed + chart.data.dead_letter).toLocaleString()} failed attempts (
        {(rate * 100).toFixed(1)}% failure rate)
      </figcaption>
      {points.length === 0 ? (
        <Empty>Nothing finished in the last hour.</Empty>
      ) : (
        <ResponsiveContainer width="100%" height={220}>
          <AreaChart data={points} margin={{ top: 8, right: 16, bottom: 0, left: 0 }}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="label" />
            <YAxis allowDecimals={false} />
            <Tooltip />
            <Legend />
            <Area dataKey="succeeded" name="succeeded" stroke="#2f7d32" fill="#2f7d3255" />
            <Area dataKey="failed" name="failed" stroke="#c62828" fill="#c6282855" />
          </AreaChart>
        </ResponsiveContainer>
      )}
    </figure>
  );
}

export function OverviewPage() {
  const { can } = useSession();
  const queues = useQuery({
    queryKey: ["queues"],
    queryFn: () => api<QueueStats[]>("/api/queues"),
    refetchInterval: live,
  });
  const workers = useQuery({
    queryKey: ["workers"],
    queryFn: () => api<Worker[]>("/api/workers"),
    refetchInterval: live,
  });
  const leaders = useQuery({
    queryKey: ["leaders"],
    queryFn: () => api<Leader[]>("/api/leaders"),
    refetchInterval: live,
  });
  const health = useQuery({
    queryKey: ["health"],
    queryFn: () => api<Health>("/api/health"),
    refetchInterval: 30_000,
    enabled: can("GET", "/api/health"),
  });
  const totals = { pending: 0, running: 0, failed: 0, dead_letter: 0 };
  for (const q of queues.data ?? []) {
    totals.pending += q.pending;
    totals.running += q.running;
    totals.failed += q.failed;
    totals.dead_letter += q.dead_letter;
  }
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <dl className="tiles">
        {Object.entries(totals).map(([state, n]) => (
          <div key={state} className="tile">
            <dt>{state.replace("_", " ")}</dt>
            <dd>
              <Link to={`/jobs?state=${state.toUpperCase()}`}>{n.toLocaleString()}</Link>
            </dd>
          </div>
        ))}
      </dl>
      {health.data && health.data.warnings.length > 0 && (
        <section aria-labelledby="health-title" className="warnings">
          <h2 id="health-title">Health warnings</h2>
          <ul>
            {health.data.warnings.map((w) => (
              <li key={w}>{w}</li>
            ))}
          </ul>
        </section>
      )}
      <h2>Throughput</h2>
      <ThroughputChart />
      <h2>Queues</h2>
      {queues.isPending ? (
        <Loading what="queues" />
      ) : queues.isError ? (
        <Failure error={queues.error} />
      ) : queues.data.length === 0 ? (
        <Empty>No queue holds jobs yet. Enqueue one from your code or with `tickwork jobs enqueue`.</Empty>
      ) : (
        <Scroll label="Queues table">
          <table>
            <thead>
              <tr>
                <th scope="col">queue</th>
                <th scope="col">pending</th>
                <th scope="col">running</th>
                <th scope="col">failed</th>
                <th scope="col">dead letter</th>
                <th scope="col">oldest waiting</th>
                <th scope="col">finished (5 min)</th>
              </tr>
            </thead>
            <tbody>
              {queues.data.map((q) => (
                <tr key={q.name}>
                  <th scope="row">
                    <Link to={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
                    {q.paused && <span className="badge warn">paused</span>}
                  </th>
                  <td>{q.pending.toLocaleString()}</td>
                  <td>{q.running.toLocaleString()}</td>
                  <td>{q.failed.toLocaleString()}</td>
                  <td>{q.dead_letter.toLocaleString()}</td>
                  <td>{age(q.oldest_pending_seconds)}</td>
                  <td>{q.finished_last_5_minutes.toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <div className="columns">
        <section aria-labelledby="workers-title">
          <h2 id="workers-title">Live workers</h2>
          {workers.isError ? (
            <Failure error={workers.error} />
          ) : (workers.data ?? []).length === 0 ? (
            <Empty>No worker is running: start one with `tickwork worker --app module:app`.</Empty>
          ) : (
            <ul className="plain">
              {workers.data?.map((w) => (
                <li key={w.id}>
                  <strong>
                    {w.host}:{w.pid}
                  </strong>{" "}
                  {w.in_flight}/{w.concurrency} busy on {w.queues.join(", ")}; seen{" "}
                  <Time value={w.last_seen_at} />
                </li>
              ))}
            </ul>
          )}
        </section>
        <section aria-labelledby="leaders-title">
          <h2 id="leaders-title">Leaders</h2>
          {leaders.isError ? (
            <Failure error={leaders.error} />
          ) : (leaders.data ?? []).length === 0 ? (
            <Empty>No leader lease is held yet.</Empty>
          ) : (
            <ul className="plain">
              {leaders.data?.map((l) => (
                <li key={l.name}>
                  <strong>{l.name}</strong> {l.holder}{" "}
                  {l.live ? "" : <span className="badge warn">expired</span>}
                </li>
              ))}
            </ul>
          )}
        </section>
      </div>
    </section>
  );
}
