import { useQuery } from "@tanstack/react-query";
import { api, post } from "../api";
import { Action } from "../components/Action";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { Time } from "../time";
import { SignalList } from "./Signal";

interface Stat {
  status: string;
  signal_type: string;
  count: number;
  oldest_created_at: string | null;
}

interface Tiered {
  config: boolean;
  override: boolean | null;
  effective: boolean;
}

interface Reactor {
  name: string;
  handles: string[];
  sweep_cron: string | null;
  enabled: Tiered;
  dry_run: Tiered;
  last_sweep: { outcome?: string; finished_at?: string } | null;
}

interface SignalRow {
  id: number;
  signal_type: string;
  aggregate_key: string | null;
  status: string;
  claimed_at: string | null;
  error_message: string | null;
}

const BASE = "/api/admin/signals";

function put(path: string, body: unknown) {
  return api(path, { method: "PUT", body: JSON.stringify(body) });
}

export function SignalsPage() {
  const stats = useQuery({
    queryKey: ["signals", "stats"],
    queryFn: () => api<Stat[]>(`${BASE}/stats`),
    refetchInterval: live,
  });
  const stuck = useQuery({
    queryKey: ["signals", "stuck"],
    queryFn: () => api<SignalRow[]>(`${BASE}/stuck?older_than=300`),
    refetchInterval: live,
  });
  const reactors = useQuery({
    queryKey: ["signals", "reactors"],
    queryFn: () => api<Reactor[]>(`${BASE}/reactors`),
  });
  return (
    <section aria-labelledby="signals-title">
      <h1 id="signals-title">Signals</h1>
      <h2>By status and type</h2>
      {stats.isPending ? (
        <Loading what="signal counts" />
      ) : stats.isError ? (
        <Failure error={stats.error} />
      ) : stats.data.length === 0 ? (
        <Empty>No signal yet: emit one with app.signals.emit(...).</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">status</th>
              <th scope="col">type</th>
              <th scope="col">count</th>
              <th scope="col">oldest</th>
            </tr>
          </thead>
          <tbody>
            {stats.data.map((s) => (
              <tr key={`${s.status}-${s.signal_type}`}>
                <td>{s.status}</td>
                <td>{s.signal_type}</td>
                <td>{s.count.toLocaleString()}</td>
                <td>
                  <Time value={s.oldest_created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Stuck (processing for more than 5 minutes)</h2>
      {stuck.isError ? (
        <Failure error={stuck.error} />
      ) : (stuck.data ?? []).length === 0 ? (
        <Empty>None: every signal taken up was settled.</Empty>
      ) : (
        <ul className="plain">
          {stuck.data?.map((s) => (
            <li key={s.id}>
              #{s.id} {s.signal_type} {s.aggregate_key ?? ""}, taken up{" "}
              <Time value={s.claimed_at} />: {s.error_message ?? "no error recorded"}
            </li>
          ))}
        </ul>
      )}
      <SignalList />
      <h2>Reactors</h2>
      {reactors.isPending ? (
        <Loading what="reactors" />
      ) : reactors.isError ? (
        <Failure error={reactors.error} />
      ) : (
        <Scroll label="Reactors table">
          <table>
            <thead>
              <tr>
                <th scope="col">reactor</th>
                <th scope="col">handles</th>
                <th scope="col">enabled</th>
                <th scope="col">dry run</th>
                <th scope="col">sweep</th>
              </tr>
            </thead>
            <tbody>
              {reactors.data.map((r) => (
                <tr key={r.name}>
                  <th scope="row">{r.name}</th>
                  <td>{r.handles.join(", ") || "-"}</td>
                  <td>
                    {r.enabled.effective ? "yes" : "no"}
                    {r.enabled.override !== null && " (override)"}{" "}
                    <Action
                      label={r.enabled.effective ? "Disable" : "Enable"}
                      name={`${r.enabled.effective ? "Disable" : "Enable"} reactor ${r.name}`}
                      run={() =>
                        put(`${BASE}/reactors/${r.name}/enabled`, { enabled: !r.enabled.effective })
                      }
                      refresh={["signals", "reactors"]}
                    />
                  </td>
                  <td>
                    {r.dry_run.effective ? "yes" : "no"}{" "}
                    <Action
                      label={r.dry_run.effective ? "Go live" : "Dry run"}
                      name={`${r.dry_run.effective ? "End dry run of" : "Dry run"} reactor ${r.name}`}
                      run={() =>
                        put(`${BASE}/reactors/${r.name}/dry-run`, { dry_run: !r.dry_run.effective })
                      }
                      refresh={["signals", "reactors"]}
                    />
                  </td>
                  <td>
                    {r.sweep_cron ? (
                      <>
                        <code>{r.sweep_cron}</code> {r.last_sweep?.outcome ?? "never run"}{" "}
                        <Action
                          label="Sweep now"
                          name={`Sweep ${r.name} now`}
                          run={() => post(`${BASE}/reactors/${r.name}/sweep`)}
                          refresh={["signals", "reactors"]}
                        />
                      </>
                    ) : (
                      "-"
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
