import { useQuery } from "@tanstack/react-query";
import type { FormEvent } from "react";
import { Link, useSearchParams } from "react-router";
import { api } from "../api";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { Time } from "../time";

interface AuditEvent {
  id: number;
  occurred_at: string;
  actor: string;
  event_type: string;
  target_type: string;
  target_id: string;
  metadata: Record<string, unknown>;
}

const FILTERS = ["actor", "event_type", "target_type", "target_id"] as const;

export function AuditPage() {
  const [params, setParams] = useSearchParams();
  const query = new URLSearchParams();
  for (const name of [...FILTERS, "before_id"]) {
    const value = params.get(name);
    if (value) query.set(name, value);
  }
  query.set("limit", "50");
  const page = useQuery({
    queryKey: ["audit", query.toString()],
    queryFn: () => api<{ items: AuditEvent[]; next_cursor: number | null }>(`/api/audit?${query}`),
  });
  function apply(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next = new URLSearchParams();
    for (const name of FILTERS) {
      const value = String(form.get(name) ?? "").trim();
      if (value) next.set(name, value);
    }
    setParams(next);
  }
  const older = new URLSearchParams(params);
  if (page.data?.next_cursor) older.set("before_id", String(page.data.next_cursor));
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit log</h1>
      <form className="filters" onSubmit={apply} aria-label="Filter the audit log">
        {FILTERS.map((name) => (
          <label key={name}>
            {name.replace("_", " ")}
            <input name={name} defaultValue={params.get(name) ?? ""} />
          </label>
        ))}
        <button type="submit">Filter</button>
      </form>
      {page.isPending ? (
        <Loading what="the audit log" />
      ) : page.isError ? (
        <Failure error={page.error} />
      ) : page.data.items.length === 0 ? (
        <Empty>No event matches.</Empty>
      ) : (
        <Scroll label="Audit events table">
          <table>
            <thead>
              <tr>
                <th scope="col">when</th>
                <th scope="col">actor</th>
                <th scope="col">event</th>
                <th scope="col">target</th>
                <th scope="col">details</th>
              </tr>
            </thead>
            <tbody>
              {page.data.items.map((e) => (
                <tr key={e.id}>
                  <td>
                    <Time value={e.occurred_at} />
                  </td>
                  <td>{e.actor}</td>
                  <td>{e.event_type}</td>
                  <td>
                    {e.target_type === "job" ? (
                      <Link to={`/jobs/${e.target_id}`}>job #{e.target_id}</Link>
                    ) : (
                      `${e.target_type} ${e.target_id}`
                    )}
                  </td>
                  <td>
                    <code>{JSON.stringify(e.metadata)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <nav className="pager" aria-label="Pages">
        {params.get("before_id") && (
          <Link to="/audit" className="button secondary">
            Newest
          </Link>
        )}
        {page.data?.next_cursor && (
          <Link to={`/audit?${older}`} className="button secondary">
            Older
          </Link>
        )}
      </nav>
    </section>
  );
}
