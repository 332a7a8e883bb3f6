import { useState, type FormEvent } from "react";
import { Navigate, useNavigate, useSearchParams } from "react-router";
import { ApiError, login } from "../api";
import { ThemeToggle } from "../components/Layout";
import { useSession } from "../session";

/** Where to go after signing in: a path of this dashboard only (never another site). */
function safeNext(next: string | null): string {
  return next && /^\/(?![/\\])/.test(next) && !next.includes("\\") ? next : "/";
}

export function LoginPage() {
  const { user, ready } = useSession();
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const next = safeNext(params.get("next"));
  if (ready && user) return <Navigate to={next} replace />;

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(null);
    try {
      await login(String(form.get("email")), String(form.get("password")));
      navigate(next, { replace: true });
    } catch (caught) {
      if (caught instanceof ApiError && caught.status === 429) {
        setError("Too many failed sign-ins: wait a few minutes, then try again.");
      } else if (caught instanceof ApiError && caught.status === 401) {
        setError("Wrong email or password.");
      } else {
        setError(caught instanceof Error ? caught.message : String(caught));
      }
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" className="centered">
      <form className="card login" onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Sign in to tickwork</h1>
        <label htmlFor="email">Email</label>
        <input id="email" name="email" type="email" autoComplete="username" required />
        <label htmlFor="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autoComplete="current-password"
          required
        />
        {error && (
          <p role="alert" className="problem">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <ThemeToggle />
      </form>
    </main>
  );
}
