import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { lazy, Suspense, useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { api, post } from "../api";
import { Action } from "../components/Action";
import { CronField } from "../components/CronField";
import { Confirm } from "../components/Confirm";
import { LiveOutput, OUTPUT_POLL } from "../components/LiveOutput";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { useSession } from "../session";
import { Time } from "../time";
import { FINAL, type JobDetail } from "../types";

interface Definition {
  id: number;
  name: string;
  description: string;
  kind: "http" | "script";
  spec: Record<string, unknown>;
  queue: string;
  cron: string | null;
  timezone: string;
  enabled: boolean;
  webhook: boolean;
  runs: number;
  failures: number;
  last_run_at: string | null;
  last_outcome: string | null;
  version: number;
}

// the editor is loaded only where it is used (it is most of the app's weight)
const CodeEditor = lazy(() =>
  import("../components/CodeEditor").then((m) => ({ default: m.CodeEditor })),
);

const LANGUAGES = ["bash", "python", "node", "typescript", "groovy"];
const SAMPLE: Record<string, string> = {
  bash: 'echo "hello from tickwork"\n',
  python: 'print("hello from tickwork")\n',
  node: 'console.log("hello from tickwork");\n',
  typescript: 'const who: string = "tickwork";\nconsole.log(`hello from ${who}`);\n',
  groovy: 'println "hello from tickwork"\n',
};

/** An HTTP call's method, URL and body: empty for a new definition, else ``spec``'s. */
function HttpFields({ spec }: { spec?: Record<string, unknown> }) {
  return (
    <>
      <label>
        Method
        <select name="method" defaultValue={String(spec?.method ?? "GET")}>
          {["GET", "POST", "PUT", "PATCH", "DELETE"].map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
      </label>
      <label>
        URL
        <input
          name="url"
          type="url"
          required
          placeholder="https://example.com/hook"
          defaultValue={spec ? String(spec.url) : undefined}
        />
      </label>
      <label>
        Body (may use {"{{ vars.NAME }}"})
        <textarea name="body" rows={4} defaultValue={String(spec?.body ?? "")} />
      </label>
    </>
  );
}

export function DefinitionsPage() {
  const { can } = useSession();
  const list = useQuery({
    queryKey: ["definitions"],
    queryFn: () => api<{ items: Definition[] }>("/api/definitions"),
    refetchInterval: live,
  });
  return (
    <section aria-labelledby="definitions-title">
      <h1 id="definitions-title">Definitions</h1>
      <p className="empty">HTTP calls and scripts defined here, run on a schedule, by a webhook or now.</p>
      {can("POST", "/api/definitions") && (
        <p>
          <Link to="/definitions/new" className="button">
            New definition
          </Link>
        </p>
      )}
      {list.isPending ? (
        <Loading what="definitions" />
      ) : list.isError ? (
        <Failure error={list.error} />
      ) : list.data.items.length === 0 ? (
        <Empty>No definition yet.</Empty>
      ) : (
        <Scroll label="Definitions table">
          <table>
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">kind</th>
                <th scope="col">schedule</th>
                <th scope="col">runs</th>
                <th scope="col">last run</th>
                <th scope="col">state</th>
              </tr>
            </thead>
            <tbody>
              {list.data.items.map((d) => (
                <tr key={d.id}>
                  <th scope="row">
                    <Link to={`/definitions/${d.id}`}>{d.name}</Link>
                  </th>
                  <td>{d.kind === "script" ? String(d.spec.language) : `HTTP ${String(d.spec.method)}`}</td>
                  <td>{d.cron ? <code>{d.cron}</code> : "-"}</td>
                  <td>
                    {d.runs.toLocaleString()} ({d.failures.toLocaleString()} failed)
                  </td>
                  <td>
                    <Time value={d.last_run_at} /> {d.last_outcome ?? ""}
                  </td>
                  <td>{d.enabled ? "enabled" : "paused"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
    </section>
  );
}

export function NewDefinitionPage() {
  const navigate = useNavigate();
  const client = useQueryClient();
  const [kind, setKind] = useState<"script" | "http">("script");
  const [lang, setLang] = useState("bash");
  const [source, setSource] = useState(SAMPLE.bash);
  const create = useMutation({
    mutationFn: (body: Record<string, unknown>) => post<Definition>("/api/definitions", body),
    onSuccess: (made) => {
      void client.invalidateQueries({ queryKey: ["definitions"] });
      navigate(`/definitions/${made.id}`);
    },
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const cron = String(form.get("cron") ?? "").trim();
    const body: Record<string, unknown> = {
      name: String(form.get("name")),
      description: String(form.get("description") ?? ""),
      kind,
      cron: cron || null,
      timezone: String(form.get("timezone") || "UTC"),
    };
    if (kind === "script") body.script = { language: lang, source };
    else
      body.http = {
        method: String(form.get("method")),
        url: String(form.get("url")),
        body: String(form.get("body") ?? "") || null,
      };
    create.mutate(body);
  }
  return (
    <section aria-labelledby="new-definition-title">
      <p>
        <Link to="/definitions">← Definitions</Link>
      </p>
      <h1 id="new-definition-title">New definition</h1>
      <form className="stack wide-form" onSubmit={submit} aria-label="New definition">
        <label>
          Name
          <input name="name" required maxLength={200} />
        </label>
        <label>
          Description
          <input name="description" maxLength={2000} />
        </label>
        <fieldset>
          <legend>Kind</legend>
          <label className="check">
            <input type="radio" name="kind" checked={kind === "script"} onChange={() => setKind("script")} />
            script
          </label>
          <label className="check">
            <input type="radio" name="kind" checked={kind === "http"} onChange={() => setKind("http")} />
            HTTP call
          </label>
        </fieldset>
        {kind === "script" ? (
          <>
            <label>
              Language
              <select
                value={lang}
                onChange={(event) => {
                  setLang(event.target.value);
                  setSource(SAMPLE[event.target.value] ?? "");
                }}
              >
                {LANGUAGES.map((l) => (
                  <option key={l}>{l}</option>
                ))}
              </select>
            </label>
            <span className="label">Script</span>
            <Suspense fallback={<Loading what="the editor" />}>
              <CodeEditor value={source} lang={lang} label="Script" onChange={setSource} />
            </Suspense>
          </>
        ) : (
          <HttpFields />
        )}
        <CronField empty="only run by hand or webhook" placeholder="*/15 * * * *" />
        <label>
          Time zone
          <input name="timezone" defaultValue={Intl.DateTimeFormat().resolvedOptions().timeZone} />
        </label>
        <button type="submit" disabled={create.isPending}>
          Create
        </button>
        {create.isError && <Failure error={create.error} />}
      </form>
    </section>
  );
}

function Activity({ id }: { id: string }) {
  const activity = useQuery({
    queryKey: ["definition", id, "activity"],
    queryFn: () =>
      api<{ buckets: { at: string; succeeded: number; failed: number }[] }>(
        `/api/definitions/${id}/activity?bucket=hour`,
      ),
    refetchInterval: 30_000,
  });
  if (activity.isPending) return <Loading what="activity" />;
  if (activity.isError) return <Failure error={activity.error} />;
  const points = activity.data.buckets.map((b) => ({
    ...b,
    label: new Date(b.at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }),
  }));
  if (points.length === 0) return <Empty>No run in the last 24 hours.</Empty>;
  return (
    <figure className="chart">
      <figcaption>Attempts per hour, last 24 hours</figcaption>
      <ResponsiveContainer width="100%" height={200}>
        <BarChart data={points}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="label" />
          <YAxis allowDecimals={false} />
          <Tooltip />
          <Legend />
          <Bar dataKey="succeeded" stackId="a" fill="#2f7d32" />
          <Bar dataKey="failed" stackId="a" fill="#c62828" />
        </BarChart>
      </ResponsiveContainer>
    </figure>
  );
}

function LastRun({ jobId }: { jobId: number }) {
  const job = useQuery({
    queryKey: ["job", String(jobId)],
    queryFn: () => api<JobDetail>(`/api/jobs/${jobId}`),
    refetchInterval: (q) => (q.state.data && FINAL.includes(q.state.data.state) ? false : OUTPUT_POLL),
  });
  if (job.isPending) return <Loading what="the run" />;
  if (job.isError) return <Failure error={job.error} />;
  const result = job.data.result as { stdout?: string; stderr?: string; status?: number } | null;
  return (
    <section aria-labelledby="run-title" aria-live="polite">
      <h2 id="run-title">
        Run <Link to={`/jobs/${jobId}`}>#{jobId}</Link>:{" "}
        <span className={`state ${job.data.state.toLowerCase()}`}>{job.data.state}</span>
      </h2>
      {job.data.state === "RUNNING" && <LiveOutput job={job.data} />}
      {result?.stdout !== undefined && (
        <pre className="code" tabIndex={0} aria-label="Output">
          {result.stdout}
          {result.stderr}
        </pre>
      )}
      {result && result.stdout === undefined && (
        <pre className="code" tabIndex={0} aria-label="Answer">
          {JSON.stringify(result, null, 2)}
        </pre>
      )}
      {job.data.error && (
        <p className="problem">
          {job.data.error.type}: {job.data.error.message}
        </p>
      )}
    </section>
  );
}

function EditDefinition({ definition }: { definition: Definition }) {
  const client = useQueryClient();
  const [source, setSource] = useState(String(definition.spec.source ?? ""));
  const edit = useMutation({
    mutationFn: (body: Record<string, unknown>) =>
      api<Definition>(`/api/definitions/${definition.id}`, {
        method: "PATCH",
        body: JSON.stringify(body),
      }),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["definition", String(definition.id)] }),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const cron = String(form.get("cron") ?? "").trim();
    const body: Record<string, unknown> = {
      description: String(form.get("description") ?? ""),
      cron: cron || null,
      timezone: String(form.get("timezone") || definition.timezone),
    };
    if (definition.kind === "script") body.script = { ...definition.spec, source };
    else
      body.http = {
        ...definition.spec,
        method: String(form.get("method")),
        url: String(form.get("url")),
        body: String(form.get("body") ?? "") || null,
      };
    edit.mutate(body);
  }
  return (
    <details>
      <summary>Edit</summary>
      <form className="stack wide-form" onSubmit={submit} aria-label={`Edit ${definition.name}`}>
        <label>
          Description
          <input name="description" defaultValue={definition.description} maxLength={2000} />
        </label>
        {definition.kind === "script" ? (
          <>
            <span className="label">Script ({String(definition.spec.language)})</span>
            <Suspense fallback={<Loading what="the editor" />}>
              <CodeEditor
                value={source}
                lang={String(definition.spec.language)}
                label="Script"
                onChange={setSource}
              />
            </Suspense>
          </>
        ) : (
          <HttpFields spec={definition.spec} />
        )}
        <CronField empty="no schedule" defaultValue={definition.cron ?? ""} />
        <label>
          Time zone
          <input name="timezone" defaultValue={definition.timezone} />
        </label>
        <button type="submit" disabled={edit.isPending}>
          Save a new version
        </button>
        {edit.isSuccess && (
          <p role="status" className="note">
            Saved: version {edit.data.version}.
          </p>
        )}
        {edit.isError && <Failure error={edit.error} />}
      </form>
    </details>
  );
}

export function DefinitionPage() {
  const { id = "" } = useParams();
  const { can } = useSession();
  const [run, setRun] = useState<number | null>(null);
  const [hook, setHook] = useState<string | null>(null);
  const definition = useQuery({
    queryKey: ["definition", id],
    queryFn: () => api<Definition>(`/api/definitions/${id}`),
  });
  const start = useMutation({
    mutationFn: () => post<{ job_id: number }>(`/api/definitions/${id}/run`),
    onSuccess: (answer) => setRun(answer.job_id),
  });
  const navigate = useNavigate();
  const remove = useMutation({
    mutationFn: () => api(`/api/definitions/${id}`, { method: "DELETE" }),
    onSuccess: () => navigate("/definitions"),
  });
  const rotate = useMutation({
    mutationFn: () => post<{ path: string; token: string }>(`/api/definitions/${id}/webhook`),
    onSuccess: (answer) => setHook(`${window.location.origin}${answer.path}`),
  });
  if (definition.isPending) return <Loading what={`definition ${id}`} />;
  if (definition.isError) return <Failure error={definition.error} />;
  const d = definition.data;
  return (
    <section aria-labelledby="definition-title">
      <p>
        <Link to="/definitions">← Definitions</Link>
      </p>
      <h1 id="definition-title">{d.name}</h1>
      <p>{d.description}</p>
      <div className="toolbar">
        {can("POST", "/api/definitions/{id}/run") && (
          <button type="button" onClick={() => start.mutate()} disabled={start.isPending}>
            Run now
          </button>
        )}
        {can("POST", "/api/definitions/{id}/pause") && (
          <Action
            label={d.enabled ? "Pause" : "Resume"}
            run={() => post(`/api/definitions/${id}/${d.enabled ? "pause" : "resume"}`)}
            refresh={["definition", id]}
          />
        )}
        {can("POST", "/api/definitions/{id}/webhook") && (
          <button type="button" className="secondary" onClick={() => rotate.mutate()}>
            {d.webhook ? "Rotate webhook" : "Make a webhook"}
          </button>
        )}
        {d.webhook && can("DELETE", "/api/definitions/{id}/webhook") && (
          <Action
            label="Remove webhook"
            run={() => api(`/api/definitions/${id}/webhook`, { method: "DELETE" })}
            refresh={["definition", id]}
          />
        )}
        {can("DELETE", "/api/definitions/{id}") && (
          <Confirm
            trigger="Delete"
            title={`Delete ${d.name}?`}
            action="Delete it"
            onConfirm={() => remove.mutate()}
          >
            <p>Its schedule and webhook go with it; the jobs it ran stay, as history.</p>
          </Confirm>
        )}
      </div>
      {remove.isError && <Failure error={remove.error} />}
      {start.isError && <Failure error={start.error} />}
      {rotate.isError && <Failure error={rotate.error} />}
      {hook && (
        <div role="status" className="note">
          <p>POST to this URL runs the definition (shown once; rotating makes a new one):</p>
          <pre className="code" tabIndex={0} aria-label="Webhook URL">
            {hook}
          </pre>
        </div>
      )}
      {run !== null && <LastRun jobId={run} />}
      <dl className="facts">
        <dt>Kind</dt>
        <dd>{d.kind}</dd>
        <dt>Schedule</dt>
        <dd>{d.cron ? `${d.cron} (${d.timezone})` : "none"}</dd>
        <dt>Runs</dt>
        <dd>
          {d.runs} ({d.failures} failed), last <Time value={d.last_run_at} />
        </dd>
        <dt>Webhook</dt>
        <dd>{d.webhook ? "yes" : "no"}</dd>
        <dt>Version</dt>
        <dd>{d.version}</dd>
      </dl>
      {can("PATCH", "/api/definitions/{id}") && <EditDefinition definition={d} />}
      <h2>What it runs</h2>
      {d.kind === "script" ? (
        <pre className="code" tabIndex={0} aria-label="Script">
          {String(d.spec.source ?? "")}
        </pre>
      ) : (
        <pre className="code" tabIndex={0}>{JSON.stringify(d.spec, null, 2)}</pre>
      )}
      <h2>Activity</h2>
      <Activity id={id} />
    </section>
  );
}
