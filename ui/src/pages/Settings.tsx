import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { FormEvent } from "react";
import { api } from "../api";
import { Action } from "../components/Action";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { useSession } from "../session";
import { Time } from "../time";

interface Setting {
  key: string;
  value: unknown;
  default: unknown;
  description: string;
  updated_at: string | null;
  updated_by: string | null;
}

interface Variable {
  name: string;
  value: string | null;
  secret: boolean;
  updated_at: string;
  updated_by: string;
}

function SettingRow({ setting }: { setting: Setting }) {
  const client = useQueryClient();
  const put = useMutation({
    mutationFn: (value: number) =>
      api(`/api/settings/${encodeURIComponent(setting.key)}`, {
        method: "PUT",
        body: JSON.stringify({ value }),
      }),
    onSettled: () => void client.invalidateQueries({ queryKey: ["settings"] }),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    put.mutate(Number(new FormData(event.currentTarget).get("value")));
  }
  return (
    <tr>
      <th scope="row">
        <code>{setting.key}</code>
      </th>
      <td>{setting.description}</td>
      <td>
        <form onSubmit={submit} className="inline">
          <input
            name="value"
            type="number"
            min={1}
            aria-label={`Value of ${setting.key}`}
            defaultValue={String(setting.value)}
          />
          <button type="submit" className="secondary" disabled={put.isPending}>
            Save
          </button>
        </form>
        {put.isError && <Failure error={put.error} />}
      </td>
      <td>{String(setting.default)}</td>
      <td>
        {setting.updated_by ? (
          <>
            {setting.updated_by}, <Time value={setting.updated_at} />
          </>
        ) : (
          "default"
        )}
      </td>
    </tr>
  );
}

function Variables() {
  const { can } = useSession();
  const client = useQueryClient();
  const variables = useQuery({
    queryKey: ["variables"],
    queryFn: () => api<Variable[]>("/api/variables"),
  });
  const put = useMutation({
    mutationFn: (body: { name: string; value: string; secret: boolean }) =>
      api(`/api/variables/${encodeURIComponent(body.name)}`, {
        method: "PUT",
        body: JSON.stringify({ value: body.value, secret: body.secret }),
      }),
    onSettled: () => void client.invalidateQueries({ queryKey: ["variables"] }),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    put.mutate({
      name: String(form.get("name")),
      value: String(form.get("value")),
      secret: form.get("secret") === "on",
    });
    event.currentTarget.reset();
  }
  return (
    <section aria-labelledby="variables-title">
      <h2 id="variables-title">Global variables</h2>
      <p className="empty">
        Used by HTTP and script jobs as {"{{ vars.NAME }}"}. A secret's value is never shown
        again once stored: only whether it is set.
      </p>
      {variables.isPending ? (
        <Loading what="variables" />
      ) : variables.isError ? (
        <Failure error={variables.error} />
      ) : variables.data.length === 0 ? (
        <Empty>No variable yet.</Empty>
      ) : (
        <Scroll label="Variables table">
          <table>
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">value</th>
                <th scope="col">changed</th>
                <th scope="col">actions</th>
              </tr>
            </thead>
            <tbody>
              {variables.data.map((v) => (
                <tr key={v.name}>
                  <th scope="row">
                    <code>{v.name}</code>
                  </th>
                  <td>{v.secret ? <em>secret (set)</em> : <code>{v.value}</code>}</td>
                  <td>
                    {v.updated_by}, <Time value={v.updated_at} />
                  </td>
                  <td>
                    {can("DELETE", "/api/variables/{name}") && (
                      <Action
                        label="Delete"
                        name={`Delete variable ${v.name}`}
                        run={() =>
                          api(`/api/variables/${encodeURIComponent(v.name)}`, { method: "DELETE" })
                        }
                        refresh={["variables"]}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      {can("PUT", "/api/variables/{name}") && (
        <form className="filters" onSubmit={submit} aria-label="Set a variable">
          <label>
            Name
            <input name="name" required pattern="[A-Za-z_][A-Za-z0-9_]*" />
          </label>
          <label>
            Value
            <input name="value" type="password" autoComplete="off" required />
          </label>
          <label className="check">
            <input name="secret" type="checkbox" defaultChecked /> secret
          </label>
          <button type="submit" disabled={put.isPending}>
            Set
          </button>
          {put.isError && <Failure error={put.error} />}
        </form>
      )}
    </section>
  );
}

export function SettingsPage() {
  const { can } = useSession();
  const settings = useQuery({
    queryKey: ["settings"],
    queryFn: () => api<Setting[]>("/api/settings"),
    enabled: can("GET", "/api/settings"),
  });
  return (
    <section aria-labelledby="settings-title">
      <h1 id="settings-title">Settings</h1>
      {can("GET", "/api/settings") &&
        (settings.isPending ? (
          <Loading what="settings" />
        ) : settings.isError ? (
          <Failure error={settings.error} />
        ) : (
          <Scroll label="Settings table">
            <table>
              <thead>
                <tr>
                  <th scope="col">setting</th>
                  <th scope="col">what</th>
                  <th scope="col">value</th>
                  <th scope="col">default</th>
                  <th scope="col">changed</th>
                </tr>
              </thead>
              <tbody>
                {settings.data.map((s) => (
                  <SettingRow key={s.key} setting={s} />
                ))}
              </tbody>
            </table>
          </Scroll>
        ))}
      <Variables />
    </section>
  );
}
