import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useNavigate, useParams } from "react-router";
import { api, post } from "../api";
import { Confirm } from "../components/Confirm";
import { LiveOutput, OUTPUT_POLL } from "../components/LiveOutput";
import { Failure, Loading } from "../components/States";
import { live } from "../live";
import { useSession } from "../session";
import { Time } from "../time";
import { FINAL, type JobDetail, type TimelineEntry } from "../types";

function Json({ value }: { value: unknown }) {
  return <pre className="code" tabIndex={0}>{JSON.stringify(value, null, 2)}</pre>;
}

export function JobPage() {
  const { id } = useParams();
  const { can } = useSession();
  const client = useQueryClient();
  const navigate = useNavigate();
  const remove = useMutation({
    mutationFn: () => api(`/api/jobs/${id}`, { method: "DELETE" }),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ["jobs"] });
      navigate("/jobs");
    },
  });
  // while a delete is under way and once it is done, the page asks nothing more of the job
  // (the event of its deletion would have it ask for a 404)
  const asking = remove.isIdle || remove.isError;
  const job = useQuery({
    queryKey: ["job", id],
    enabled: asking,
    queryFn: () => api<JobDetail>(`/api/jobs/${id}`),
    refetchInterval: (q) =>
      q.state.data && FINAL.includes(q.state.data.state)
        ? false
        : q.state.data?.progress?.output
          ? OUTPUT_POLL
          : live(),
  });
  const timeline = useQuery({
    queryKey: ["job", id, "timeline"],
    enabled: asking,
    queryFn: () => api<TimelineEntry[]>(`/api/jobs/${id}/timeline`),
    refetchInterval: () => (job.data && FINAL.includes(job.data.state) ? false : live()),
  });
  const act = useMutation({
    mutationFn: (operation: "retry" | "cancel") => post(`/api/jobs/${id}/${operation}`),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["job", id] }),
  });
  if (job.isPending) return <Loading what={`job ${id}`} />;
  if (job.isError) return <Failure error={job.error} />;
  const j = job.data;
  const retryable = j.state === "DEAD_LETTER" || j.state === "FAILED";
  const cancellable = j.state === "PENDING" || j.state === "FAILED" || j.state === "RUNNING";
  return (
    <section aria-labelledby="job-title">
      <p>
        <Link to="/jobs">← Jobs</Link>
      </p>
      <h1 id="job-title">
        Job #{j.id} <span className={`state ${j.state.toLowerCase()}`}>{j.state}</span>
      </h1>
      <div className="toolbar">
        {retryable && can("POST", "/api/jobs/{job_id}/retry") && (
          <button type="button" onClick={() => act.mutate("retry")} disabled={act.isPending}>
            Retry
          </button>
        )}
        {cancellable && can("POST", "/api/jobs/{job_id}/cancel") && (
          <button
            type="button"
            onClick={() => act.mutate("cancel")}
            disabled={act.isPending || j.cancel_requested_at !== null}
          >
            {j.cancel_requested_at ? "Cancel requested" : "Cancel"}
          </button>
        )}
        {j.state !== "RUNNING" && can("DELETE", "/api/jobs/{job_id}") && (
          <Confirm
            trigger="Delete"
            title={`Delete job #${j.id}?`}
            action="Delete it"
            onConfirm={() => remove.mutate()}
          >
            <p>
              The job and its {j.attempts === 1 ? "attempt go" : `${j.attempts} attempts go`} for
              good; the audit trail keeps who deleted it.
            </p>
          </Confirm>
        )}
      </div>
      {act.isError && <Failure error={act.error} />}
      {remove.isError && <Failure error={remove.error} />}
      <dl className="facts">
        <dt>Task</dt>
        <dd>
          <Link to={`/jobs?task=${encodeURIComponent(j.task)}`}>{j.task}</Link>
        </dd>
        <dt>Queue</dt>
        <dd>
          <Link to={`/jobs?queue=${encodeURIComponent(j.queue)}`}>{j.queue}</Link>
        </dd>
        <dt>Attempts</dt>
        <dd>
          {j.attempts} of {j.max_attempts}
        </dd>
        <dt>Created</dt>
        <dd>
          <Time value={j.created_at} /> by {j.created_by}
        </dd>
        <dt>Due</dt>
        <dd>
          <Time value={j.run_at} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time value={j.finished_at} />
        </dd>
      </dl>
      {j.state === "RUNNING" && <LiveOutput job={j} />}
      <h2>Arguments</h2>
      <Json value={j.args} />
      {j.state === "SUCCEEDED" && (
        <>
          <h2>Result</h2>
          <Json value={j.result} />
        </>
      )}
      {j.error && (
        <section aria-labelledby="error-title">
          <h2 id="error-title">Last error</h2>
          <p>
            <strong>{j.error.type}</strong>: {j.error.message}
          </p>
          {j.error.traceback && (
            <pre className="code" tabIndex={0} aria-label="Traceback">
              {j.error.traceback}
            </pre>
          )}
        </section>
      )}
      <h2>Timeline</h2>
      {timeline.isError ? (
        <Failure error={timeline.error} />
      ) : (
        <ol className="timeline">
          {(timeline.data ?? []).map((e, i) => (
            <li key={`${e.at}-${e.event}-${i}`}>
              <Time value={e.at} /> <strong>{e.event}</strong>
              {e.attempt !== null && <> (attempt {e.attempt})</>} by {e.actor}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
