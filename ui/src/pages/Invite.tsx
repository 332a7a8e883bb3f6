import { useMutation } from "@tanstack/react-query";
import type { FormEvent } from "react";
import { Link, useSearchParams } from "react-router";
import { post } from "../api";
import { Failure } from "../components/States";

export function InvitePage() {
  const [params] = useSearchParams();
  const accept = useMutation({
    mutationFn: (body: { token: string; name: string; password: string }) =>
      post<{ email: string }>("/api/invites/accept", body),
  });
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    accept.mutate({
      token: String(form.get("token")),
      name: String(form.get("name")),
      password: String(form.get("password")),
    });
  }
  return (
    <main id="main" className="centered">
      <form className="card login" onSubmit={submit} aria-labelledby="invite-title">
        <h1 id="invite-title">Accept an invite</h1>
        {accept.isSuccess ? (
          <p role="status" className="note">
            Welcome, {accept.data.email}. <Link to="/login">Sign in</Link> with your new password.
          </p>
        ) : (
          <>
            <label htmlFor="token">Invite token</label>
            <input id="token" name="token" defaultValue={params.get("token") ?? ""} required />
            <label htmlFor="name">Your name</label>
            <input id="name" name="name" autoComplete="name" required />
            <label htmlFor="password">Choose a password (12 characters or more)</label>
            <input
              id="password"
              name="password"
              type="password"
              autoComplete="new-password"
              minLength={12}
              required
            />
            {accept.isError && <Failure error={accept.error} />}
            <button type="submit" disabled={accept.isPending}>
              Accept and create my account
            </button>
          </>
        )}
      </form>
    </main>
  );
}
