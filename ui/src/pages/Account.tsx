import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api, post, type Role } from "../api";
import { Action } from "../components/Action";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { RANK } from "../roles";
import { useSession } from "../session";
import { Time } from "../time";

interface ApiToken {
  id: number;
  name: string;
  role: Role;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

function PasswordForm() {
  const [done, setDone] = useState(false);
  const change = useMutation({
    mutationFn: (body: { current_password: string; new_password: string }) =>
      post("/api/me/password", body),
    onSuccess: () => setDone(true),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setDone(false);
    change.mutate({
      current_password: String(form.get("current")),
      new_password: String(form.get("new")),
    });
    event.currentTarget.reset();
  }
  return (
    <form className="stack" onSubmit={submit} aria-labelledby="password-title">
      <h2 id="password-title">Change password</h2>
      <label>
        Current password
        <input name="current" type="password" autoComplete="current-password" required />
      </label>
      <label>
        New password
        <input name="new" type="password" autoComplete="new-password" minLength={12} required />
      </label>
      <button type="submit" disabled={change.isPending}>
        Change password
      </button>
      {done && (
        <p role="status" className="note">
          Password changed. Your other sessions were signed out.
        </p>
      )}
      {change.isError && <Failure error={change.error} />}
    </form>
  );
}

function Tokens() {
  const { user } = useSession();
  const client = useQueryClient();
  const [shown, setShown] = useState<string | null>(null);
  const tokens = useQuery({ queryKey: ["tokens"], queryFn: () => api<ApiToken[]>("/api/me/tokens") });
  const create = useMutation({
    mutationFn: (body: { name: string; role: string; expires_in: number | null }) =>
      post<{ token: string }>("/api/me/tokens", body),
    onSuccess: (answer) => {
      setShown(answer.token);
      void client.invalidateQueries({ queryKey: ["tokens"] });
    },
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const days = Number(form.get("days"));
    create.mutate({
      name: String(form.get("name")),
      role: String(form.get("role")),
      expires_in: days > 0 ? days * 86400 : null,
    });
  }
  const roles = (Object.keys(RANK) as Role[]).filter((r) => user && RANK[r] <= RANK[user.role]);
  return (
    <section aria-labelledby="tokens-title">
      <h2 id="tokens-title">Personal API tokens</h2>
      <p className="empty">
        For scripts, the CLI (`--token`) and assistants: a bearer token with a role no stronger
        than yours.
      </p>
      <form className="filters" onSubmit={submit} aria-label="New API token">
        <label>
          Name
          <input name="name" required maxLength={100} />
        </label>
        <label>
          Role
          <select name="role" defaultValue={roles[0]}>
            {roles.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </label>
        <label>
          Expires after (days, 0: never)
          <input name="days" type="number" min={0} defaultValue={90} />
        </label>
        <button type="submit" disabled={create.isPending}>
          Create token
        </button>
      </form>
      {create.isError && <Failure error={create.error} />}
      {shown && (
        <div role="status" className="note">
          <p>Copy this token now: it is not shown again.</p>
          <pre className="code" tabIndex={0} aria-label="New token">
            {shown}
          </pre>
        </div>
      )}
      {tokens.isPending ? (
        <Loading what="tokens" />
      ) : tokens.isError ? (
        <Failure error={tokens.error} />
      ) : tokens.data.length === 0 ? (
        <Empty>No token yet.</Empty>
      ) : (
        <Scroll label="API tokens table">
          <table>
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">role</th>
                <th scope="col">created</th>
                <th scope="col">expires</th>
                <th scope="col">last used</th>
                <th scope="col">state</th>
              </tr>
            </thead>
            <tbody>
              {tokens.data.map((t) => (
                <tr key={t.id}>
                  <th scope="row">{t.name}</th>
                  <td>{t.role}</td>
                  <td>
                    <Time value={t.created_at} />
                  </td>
                  <td>
                    <Time value={t.expires_at} />
                  </td>
                  <td>
                    <Time value={t.last_used_at} />
                  </td>
                  <td>
                    {t.revoked_at ? (
                      "revoked"
                    ) : (
                      <Action
                        label="Revoke"
                        name={`Revoke token ${t.name}`}
                        run={() => api(`/api/me/tokens/${t.id}`, { method: "DELETE" })}
                        refresh={["tokens"]}
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

export function AccountPage() {
  const { user } = useSession();
  return (
    <section aria-labelledby="account-title">
      <h1 id="account-title">Your account</h1>
      <p>
        {user?.email} <span className="badge">{user?.role}</span>
      </p>
      <PasswordForm />
      <Tokens />
    </section>
  );
}
