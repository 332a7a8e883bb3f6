import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api, BASE, post } from "../api";
import { Action } from "../components/Action";
import { Scroll } from "../components/Scroll";
import { Empty, Failure, Loading } from "../components/States";
import { useSession } from "../session";
import { Time } from "../time";

interface UserRow {
  id: number;
  email: string;
  name: string;
  role: string;
  disabled: boolean;
  last_login_at: string | null;
}

interface Invite {
  id: number;
  email: string;
  role: string;
  created_by: string;
  expires_at: string;
  accepted_at: string | null;
  revoked_at: string | null;
}

const ROLES = ["VIEWER", "OPERATOR", "ADMIN"];

function patch(id: number, body: Record<string, unknown>) {
  return api(`/api/users/${id}`, { method: "PATCH", body: JSON.stringify(body) });
}

function Invites() {
  const client = useQueryClient();
  const [link, setLink] = useState<string | null>(null);
  const invites = useQuery({ queryKey: ["invites"], queryFn: () => api<Invite[]>("/api/invites") });
  const create = useMutation({
    mutationFn: (body: { email: string; role: string }) =>
      post<{ token: string }>("/api/invites", body),
    onSuccess: (answer) => {
      setLink(`${window.location.origin}${BASE}/invite?token=${encodeURIComponent(answer.token)}`);
      void client.invalidateQueries({ queryKey: ["invites"] });
    },
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    create.mutate({ email: String(form.get("email")), role: String(form.get("role")) });
  }
  return (
    <section aria-labelledby="invites-title">
      <h2 id="invites-title">Invites</h2>
      <form className="filters" onSubmit={submit} aria-label="New invite">
        <label>
          Email
          <input name="email" type="email" required />
        </label>
        <label>
          Role
          <select name="role" defaultValue="VIEWER">
            {ROLES.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={create.isPending}>
          Invite
        </button>
      </form>
      {create.isError && <Failure error={create.error} />}
      {link && (
        <div role="status" className="note">
          <p>Send this link to the person invited (it is not shown again):</p>
          <pre className="code" tabIndex={0} aria-label="Invite link">
            {link}
          </pre>
        </div>
      )}
      {invites.isError ? (
        <Failure error={invites.error} />
      ) : (invites.data ?? []).length === 0 ? (
        <Empty>No invite.</Empty>
      ) : (
        <ul className="plain">
          {invites.data?.map((i) => (
            <li key={i.id}>
              {i.email} as {i.role}:{" "}
              {i.accepted_at ? (
                "accepted"
              ) : i.revoked_at ? (
                "revoked"
              ) : (
                <>
                  open until <Time value={i.expires_at} />{" "}
                  <Action
                    label="Revoke"
                    name={`Revoke the invite of ${i.email}`}
                    run={() => api(`/api/invites/${i.id}`, { method: "DELETE" })}
                    refresh={["invites"]}
                  />
                </>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

export function UsersPage() {
  const { user } = useSession();
  const users = useQuery({ queryKey: ["users"], queryFn: () => api<UserRow[]>("/api/users") });
  return (
    <section aria-labelledby="users-title">
      <h1 id="users-title">Users</h1>
      {users.isPending ? (
        <Loading what="users" />
      ) : users.isError ? (
        <Failure error={users.error} />
      ) : (
        <Scroll label="Users table">
          <table>
            <thead>
              <tr>
                <th scope="col">email</th>
                <th scope="col">name</th>
                <th scope="col">role</th>
                <th scope="col">last sign-in</th>
                <th scope="col">access</th>
              </tr>
            </thead>
            <tbody>
              {users.data.map((u) => (
                <tr key={u.id}>
                  <th scope="row">{u.email}</th>
                  <td>{u.name}</td>
                  <td>
                    {u.id === user?.id ? (
                      u.role
                    ) : (
                      <RoleSelect user={u} />
                    )}
                  </td>
                  <td>
                    <Time value={u.last_login_at} />
                  </td>
                  <td>
                    {u.id === user?.id ? (
                      "you"
                    ) : (
                      <Action
                        label={u.disabled ? "Enable" : "Disable"}
                        name={`${u.disabled ? "Enable" : "Disable"} ${u.email}`}
                        run={() => patch(u.id, { disabled: !u.disabled })}
                        refresh={["users"]}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <Invites />
    </section>
  );
}

function RoleSelect({ user }: { user: UserRow }) {
  const client = useQueryClient();
  const change = useMutation({
    mutationFn: (role: string) => patch(user.id, { role }),
    onSettled: () => void client.invalidateQueries({ queryKey: ["users"] }),
  });
  return (
    <>
      <select
        aria-label={`Role of ${user.email}`}
        value={user.role}
        disabled={change.isPending}
        onChange={(event) => change.mutate(event.target.value)}
      >
        {ROLES.map((r) => (
          <option key={r}>{r}</option>
        ))}
      </select>
      {change.isError && <Failure error={change.error} />}
    </>
  );
}
