import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api, post } from "../api";
import { Action } from "../components/Action";
import { CronField } from "../components/CronField";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { live } from "../live";
import { useSession } from "../session";
import { Time } from "../time";

interface Schedule {
  name: string;
  task: string;
  cron: string;
  timezone: string;
  queue: string | null;
  enabled: boolean;
  paused: boolean;
  next_run_at: string;
  last_fire_at: string | null;
  origin: string;
}

function CreateForm() {
  const client = useQueryClient();
  const [badArgs, setBadArgs] = useState(false);
  const create = useMutation({
    mutationFn: (body: Record<string, unknown>) => post("/api/schedules", body),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["schedules"] }),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    let args: unknown = {};
    try {
      args = JSON.parse(String(form.get("args") || "{}"));
    } catch {
      setBadArgs(true);
      return;
    }
    setBadArgs(false);
    create.mutate({
      name: String(form.get("name")),
      task: String(form.get("task")),
      cron: String(form.get("cron")),
      timezone: String(form.get("timezone") || "UTC"),
      args,
    });
  }
  return (
    <form className="filters" onSubmit={submit} aria-labelledby="new-schedule">
      <h2 id="new-schedule" className="wide">
        New schedule
      </h2>
      <label>
        Name
        <input name="name" required maxLength={200} />
      </label>
      <label>
        Task
        <input name="task" required />
      </label>
      <CronField required placeholder="*/5 * * * *" />
      <label>
        Time zone
        <input name="timezone" defaultValue={Intl.DateTimeFormat().resolvedOptions().timeZone} />
      </label>
      <label>
        Arguments (JSON)
        <input name="args" defaultValue="{}" />
      </label>
      <button type="submit" disabled={create.isPending}>
        Create
      </button>
      {badArgs && (
        <p role="alert" className="problem">
          Arguments must be a JSON object, for example {'{"to": "ada"}'}.
        </p>
      )}
      {create.isError && <Failure error={create.error} />}
    </form>
  );
}

function EditForm({ schedule }: { schedule: Schedule }) {
  const client = useQueryClient();
  const edit = useMutation({
    mutationFn: (body: Record<string, unknown>) =>
      api(`/api/schedules/${encodeURIComponent(schedule.name)}`, {
        method: "PATCH",
        body: JSON.stringify(body),
      }),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["schedules"] }),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    edit.mutate({ cron: String(form.get("cron")), timezone: String(form.get("timezone")) });
  }
  return (
    <details>
      <summary>Edit</summary>
      <form className="inline" onSubmit={submit} aria-label={`Edit schedule ${schedule.name}`}>
        <CronField required defaultValue={schedule.cron} />
        <label>
          Time zone
          <input name="timezone" defaultValue={schedule.timezone} required />
        </label>
        <button type="submit" className="secondary" disabled={edit.isPending}>
          Save
        </button>
      </form>
      {edit.isError && <Failure error={edit.error} />}
    </details>
  );
}

export function SchedulesPage() {
  const { can } = useSession();
  const schedules = useQuery({
    queryKey: ["schedules"],
    queryFn: () => api<Schedule[]>("/api/schedules"),
    refetchInterval: live,
  });
  const path = (s: Schedule, action: string) =>
    `/api/schedules/${encodeURIComponent(s.name)}/${action}`;
  return (
    <section aria-labelledby="schedules-title">
      <h1 id="schedules-title">Schedules</h1>
      {schedules.isPending ? (
        <Loading what="schedules" />
      ) : schedules.isError ? (
        <Failure error={schedules.error} />
      ) : schedules.data.length === 0 ? (
        <Empty>No schedule yet: define one in code (app.schedule) or create one below.</Empty>
      ) : (
        <Scroll label="Schedules table">
          <table>
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">task</th>
                <th scope="col">cron</th>
                <th scope="col">next run</th>
                <th scope="col">last fired</th>
                <th scope="col">from</th>
                <th scope="col">actions</th>
              </tr>
            </thead>
            <tbody>
              {schedules.data.map((s) => (
                <tr key={s.name}>
                  <th scope="row">{s.name}</th>
                  <td>{s.task}</td>
                  <td>
                    <code>{s.cron}</code> {s.timezone}
                  </td>
                  <td>{s.paused || !s.enabled ? "paused" : <Time value={s.next_run_at} />}</td>
                  <td>
                    <Time value={s.last_fire_at} />
                  </td>
                  <td>{s.origin}</td>
                  <td className="actions-cell">
                    {can("POST", "/api/schedules/{name}/pause") && (
                      <Action
                        label={s.paused ? "Resume" : "Pause"}
                        name={`${s.paused ? "Resume" : "Pause"} schedule ${s.name}`}
                        run={() => post(path(s, s.paused ? "resume" : "pause"))}
                        refresh={["schedules"]}
                      />
                    )}
                    {can("POST", "/api/schedules/{name}/trigger") && (
                      <Action
                        label="Run now"
                        name={`Run schedule ${s.name} now`}
                        run={() => post(path(s, "trigger"))}
                        refresh={["schedules"]}
                      />
                    )}
                    {s.origin === "api" && can("PATCH", "/api/schedules/{name}") && (
                      <EditForm schedule={s} />
                    )}
                    {s.origin === "api" && can("DELETE", "/api/schedules/{name}") && (
                      <Action
                        label="Delete"
                        name={`Delete schedule ${s.name}`}
                        run={() =>
                          api(`/api/schedules/${encodeURIComponent(s.name)}`, { method: "DELETE" })
                        }
                        refresh={["schedules"]}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      {can("POST", "/api/schedules") && <CreateForm />}
    </section>
  );
}
