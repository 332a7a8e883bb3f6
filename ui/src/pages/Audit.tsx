import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { api } from "../api";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { Pager, useListing } from "../listing";
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
  const { params, filter, before, query, apply } = useListing(FILTERS);
  const page = useQuery({
    queryKey: ["audit", query.toString()],
    queryFn: () => api<{ items: AuditEvent[]; next_cursor: number | null }>(`/api/audit?${query}`),
  });
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
      <Pager base="/audit" filter={filter} before={before} next={page.data?.next_cursor} />
    </section>
  );
}
