import { useQuery } from "@tanstack/react-query";
import { Link, useParams } from "react-router";
import { api, post } from "../api";
import { Action } from "../components/Action";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { Pager, useListing } from "../listing";
import { live } from "../live";
import { Time } from "../time";

const BASE = "/api/admin/signals";
const STATUSES = ["PENDING", "PROCESSING", "COMPLETED", "DEAD", "FAILED"];

interface Signal {
  id: number;
  signal_type: string;
  entity_type: string | null;
  entity_id: string | null;
  aggregate_key: string | null;
  organisation_id: string | null;
  payload: unknown;
  status: string;
  created_at: string;
  process_after: string;
  processed_at: string | null;
  error_message: string | null;
  retry_count: number;
}

interface Delivery {
  reactor_name: string;
  status: string;
  dry_run: boolean;
  processed_at: string | null;
  error_message: string | null;
  retry_count: number;
  next_retry_at: string | null;
}

/** The signal listing, filtered (FAILED: a reactor failed, whatever the signal's status). */
export function SignalList() {
  const { params, filter, before, query, apply } = useListing(["status", "signal_type"]);
  const page = useQuery({
    queryKey: ["signals", "list", query.toString()],
    queryFn: () => api<{ items: Signal[]; next_cursor: number | null }>(`${BASE}?${query}`),
    refetchInterval: live,
  });
  return (
    <section aria-labelledby="signal-list-title">
      <h2 id="signal-list-title">Signals</h2>
      <form className="filters" onSubmit={apply} aria-label="Filter signals">
        <label>
          Status
          <select name="status" defaultValue={params.get("status") ?? ""}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Type
          <input name="signal_type" defaultValue={params.get("signal_type") ?? ""} />
        </label>
        <button type="submit">Filter</button>
      </form>
      {page.isPending ? (
        <Loading what="signals" />
      ) : page.isError ? (
        <Failure error={page.error} />
      ) : page.data.items.length === 0 ? (
        <Empty>No signal matches.</Empty>
      ) : (
        <Scroll label="Signals table">
          <table>
            <thead>
              <tr>
                <th scope="col">id</th>
                <th scope="col">type</th>
                <th scope="col">key</th>
                <th scope="col">status</th>
                <th scope="col">created</th>
              </tr>
            </thead>
            <tbody>
              {page.data.items.map((s) => (
                <tr key={s.id}>
                  <th scope="row">
                    <Link to={`/signals/${s.id}`}>#{s.id}</Link>
                  </th>
                  <td>{s.signal_type}</td>
                  <td>{s.aggregate_key ?? "-"}</td>
                  <td>{s.status}</td>
                  <td>
                    <Time value={s.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <Pager base="/signals" filter={filter} before={before} next={page.data?.next_cursor} />
    </section>
  );
}

export function SignalPage() {
  const { id = "" } = useParams();
  const detail = useQuery({
    queryKey: ["signal", id],
    queryFn: () => api<{ signal: Signal; deliveries: Delivery[] }>(`${BASE}/${id}`),
    refetchInterval: live,
  });
  if (detail.isPending) return <Loading what={`signal ${id}`} />;
  if (detail.isError) return <Failure error={detail.error} />;
  const { signal: s, deliveries } = detail.data;
  return (
    <section aria-labelledby="signal-title">
      <p>
        <Link to="/signals">← Signals</Link>
      </p>
      <h1 id="signal-title">
        Signal #{s.id} {s.status}
      </h1>
      <div className="toolbar">
        {s.status === "DEAD" && (
          <Action label="Retry" run={() => post(`${BASE}/${id}/retry`)} refresh={["signal", id]} className="" />
        )}
        {s.status === "PENDING" && (
          <Action label="Cancel" run={() => post(`${BASE}/${id}/cancel`)} refresh={["signal", id]} className="" />
        )}
      </div>
      <dl className="facts">
        <dt>Type</dt>
        <dd>{s.signal_type}</dd>
        <dt>Entity</dt>
        <dd>
          {s.entity_type ?? "-"} {s.entity_id ?? ""}
        </dd>
        <dt>Key</dt>
        <dd>{s.aggregate_key ?? "-"}</dd>
        <dt>Organisation</dt>
        <dd>{s.organisation_id ?? "-"}</dd>
        <dt>Created</dt>
        <dd>
          <Time value={s.created_at} />
        </dd>
        <dt>Processed</dt>
        <dd>
          <Time value={s.processed_at} />
        </dd>
        <dt>Error</dt>
        <dd>{s.error_message ?? "-"}</dd>
      </dl>
      <h2>Payload</h2>
      <pre className="code" tabIndex={0}>{JSON.stringify(s.payload, null, 2)}</pre>
      <h2>Deliveries</h2>
      {deliveries.length === 0 ? (
        <Empty>No reactor has taken it up yet.</Empty>
      ) : (
        <Scroll label="Deliveries table">
          <table>
            <thead>
              <tr>
                <th scope="col">reactor</th>
                <th scope="col">status</th>
                <th scope="col">retries</th>
                <th scope="col">processed</th>
                <th scope="col">error</th>
                <th scope="col">actions</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d) => (
                <tr key={d.reactor_name}>
                  <th scope="row">{d.reactor_name}</th>
                  <td>
                    {d.status}
                    {d.dry_run && " (dry run)"}
                  </td>
                  <td>{d.retry_count}</td>
                  <td>
                    <Time value={d.processed_at} />
                  </td>
                  <td>{d.error_message ?? "-"}</td>
                  <td>
                    {d.status === "DEAD" && (
                      <Action
                        label="Retry"
                        name={`Retry the delivery to ${d.reactor_name}`}
                        run={() => post(`${BASE}/${id}/reactors/${d.reactor_name}/retry`)}
                        refresh={["signal", id]}
                      />
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
