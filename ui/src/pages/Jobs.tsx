import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router";
import { api, post } from "../api";
import { bulkBody } from "../bulk";
import { Confirm } from "../components/Confirm";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { Pager, useListing } from "../listing";
import { live } from "../live";
import { useSession } from "../session";
import { Time } from "../time";
import { JOB_STATES, type JobPage } from "../types";

const FILTERS = ["q", "state", "queue", "task", "created_from", "created_to"] as const;
const TIMES = new Set<string>(["created_from", "created_to"]);

/** A datetime-local value (the browser's zone) as an instant the API takes, and back. */
function instant(local: string): string {
  return new Date(local).toISOString();
}

function localValue(value: string | null): string {
  if (!value) return "";
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) return "";
  return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function JobsPage() {
  const { params, filter, before, query, apply } = useListing(FILTERS, (name, value) =>
    TIMES.has(name) ? instant(value) : value,
  );
  const { can } = useSession();
  const client = useQueryClient();
  const [done, setDone] = useState<string | null>(null);
  if (!filter.get("q")) query.set("count", "true"); // the count is of the filters, not the text
  const page = useQuery({
    queryKey: ["jobs", query.toString()],
    queryFn: () => api<JobPage>(`/api/jobs?${query}`),
    refetchInterval: before ? false : live,
  });
  const bulk = useMutation({
    mutationFn: (operation: "retry" | "cancel") =>
      post<{ matched: number; changed: number[]; refused: number[] }>(
        `/api/jobs/bulk/${operation}`,
        bulkBody(filter),
      ),
    onSuccess: (answer, operation) => {
      // a retry runs a definition only as it is now: runs of deleted ones stay as they are
      const refused = answer.refused.length
        ? `; ${answer.refused.length} runs of deleted definitions not retried`
        : "";
      setDone(`${operation}: ${answer.changed.length} of ${answer.matched} jobs changed${refused}`);
      void client.invalidateQueries({ queryKey: ["jobs"] });
    },
  });


  const searching = Boolean(filter.get("q"));
  const total = searching ? undefined : page.data?.total;
  const matched = total ? `${total.count.toLocaleString()}${total.capped ? "+" : ""}` : "";
  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs</h1>
      <form className="filters" onSubmit={apply} aria-label="Filter jobs">
        <label>
          Search
          <input
            name="q"
            type="search"
            maxLength={200}
            placeholder="#id, task, key, arguments, error…"
            defaultValue={params.get("q") ?? ""}
          />
        </label>
        <label>
          State
          <select name="state" defaultValue={params.get("state") ?? ""}>
            <option value="">any</option>
            {JOB_STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Queue
          <input name="queue" defaultValue={params.get("queue") ?? ""} />
        </label>
        <label>
          Task
          <input name="task" defaultValue={params.get("task") ?? ""} />
        </label>
        <label>
          Created from
          <input
            name="created_from"
            type="datetime-local"
            defaultValue={localValue(params.get("created_from"))}
          />
        </label>
        <label>
          Created before
          <input
            name="created_to"
            type="datetime-local"
            defaultValue={localValue(params.get("created_to"))}
          />
        </label>
        <button type="submit">Filter</button>
      </form>
      {done && (
        <p role="status" className="note">
          {done}
        </p>
      )}
      {bulk.isError && <Failure error={bulk.error} />}
      {page.isPending ? (
        <Loading what="jobs" />
      ) : page.isError ? (
        <Failure error={page.error} />
      ) : (
        <>
          <div className="toolbar">
            <span role="status">
              {searching
                ? "Each page searches the 20,000 newest jobs left under the filters; Older searches on."
                : `${matched} jobs match`}
            </span>
            {total && total.count > 0 && can("POST", "/api/jobs/bulk/retry") && (
              <Confirm
                trigger="Retry all"
                title="Retry every matching job?"
                action={`Retry ${matched} jobs`}
                onConfirm={() => bulk.mutate("retry")}
              >
                <p>
                  {matched} jobs match this filter. Dead-lettered and failed ones go back to
                  pending now; the others are left as they are.
                </p>
              </Confirm>
            )}
            {total && total.count > 0 && can("POST", "/api/jobs/bulk/cancel") && (
              <Confirm
                trigger="Cancel all"
                title="Cancel every matching job?"
                action={`Cancel ${matched} jobs`}
                onConfirm={() => bulk.mutate("cancel")}
              >
                <p>
                  {matched} jobs match this filter. Pending and failed ones are cancelled now,
                  running ones when their attempt ends.
                </p>
              </Confirm>
            )}
          </div>
          {page.data.items.length === 0 ? (
            <Empty>
              {page.data.next_cursor
                ? "No match among these jobs. Older searches the next ones."
                : "No job matches. Change the filter, or enqueue one."}
            </Empty>
          ) : (
            <Scroll label="Jobs table">
              <table>
                <thead>
                  <tr>
                    <th scope="col">id</th>
                    <th scope="col">state</th>
                    <th scope="col">queue</th>
                    <th scope="col">task</th>
                    <th scope="col">attempts</th>
                    <th scope="col">created</th>
                    <th scope="col">finished</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.items.map((j) => (
                    <tr key={j.id}>
                      <th scope="row">
                        <Link to={`/jobs/${j.id}`}>#{j.id}</Link>
                      </th>
                      <td>
                        <span className={`state ${j.state.toLowerCase()}`}>{j.state}</span>
                      </td>
                      <td>{j.queue}</td>
                      <td>{j.task}</td>
                      <td>
                        {j.attempts}/{j.max_attempts}
                      </td>
                      <td>
                        <Time value={j.created_at} />
                      </td>
                      <td>
                        <Time value={j.finished_at} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </Scroll>
          )}
          <Pager base="/jobs" filter={filter} before={before} next={page.data.next_cursor} />
        </>
      )}
    </section>
  );
}
