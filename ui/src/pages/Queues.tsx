import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "react-router";
import { api, post } from "../api";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { useSession } from "../session";
import { age } from "../time";
import type { QueueStats } from "../types";

export function QueuesPage() {
  const { can } = useSession();
  const client = useQueryClient();
  const queues = useQuery({
    queryKey: ["queues"],
    queryFn: () => api<QueueStats[]>("/api/queues"),
    refetchInterval: live,
  });
  const toggle = useMutation({
    mutationFn: ({ name, pause }: { name: string; pause: boolean }) =>
      post(`/api/queues/${encodeURIComponent(name)}/${pause ? "pause" : "resume"}`),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["queues"] }),
  });
  const mayPause = can("POST", "/api/queues/{name}/pause");
  return (
    <section aria-labelledby="queues-title">
      <h1 id="queues-title">Queues</h1>
      {toggle.isError && <Failure error={toggle.error} />}
      {queues.isPending ? (
        <Loading what="queues" />
      ) : queues.isError ? (
        <Failure error={queues.error} />
      ) : queues.data.length === 0 ? (
        <Empty>No queue holds jobs yet.</Empty>
      ) : (
        <Scroll label="Queues table">
          <table>
            <thead>
              <tr>
                <th scope="col">queue</th>
                <th scope="col">pending</th>
                <th scope="col">running</th>
                <th scope="col">succeeded</th>
                <th scope="col">dead letter</th>
                <th scope="col">oldest waiting</th>
                <th scope="col">finished (5 min)</th>
                <th scope="col">state</th>
              </tr>
            </thead>
            <tbody>
              {queues.data.map((q) => (
                <tr key={q.name}>
                  <th scope="row">
                    <Link to={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
                  </th>
                  <td>{q.pending.toLocaleString()}</td>
                  <td>{q.running.toLocaleString()}</td>
                  <td>{q.succeeded.toLocaleString()}</td>
                  <td>{q.dead_letter.toLocaleString()}</td>
                  <td>{age(q.oldest_pending_seconds)}</td>
                  <td>{q.finished_last_5_minutes.toLocaleString()}</td>
                  <td>
                    {q.paused ? "paused" : "running"}{" "}
                    {mayPause && (
                      <button
                        type="button"
                        className="secondary"
                        aria-label={`${q.paused ? "Resume" : "Pause"} queue ${q.name}`}
                        onClick={() => toggle.mutate({ name: q.name, pause: !q.paused })}
                      >
                        {q.paused ? "Resume" : "Pause"}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
    </section>
  );
}
