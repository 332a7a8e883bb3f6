import { useEffect, useState } from "react";
import { Navigate, NavLink, Outlet, useLocation } from "react-router";
import { logout } from "../api";
import { useEvents } from "../live";
import { useSession } from "../session";

type Theme = "light" | "dark";

function initialTheme(): Theme {
  const stored = localStorage.getItem("tickwork.theme");
  if (stored === "light" || stored === "dark") return stored;
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(initialTheme);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("tickwork.theme", theme);
  }, [theme]);
  const next = theme === "dark" ? "light" : "dark";
  return (
    <button type="button" className="secondary" onClick={() => setTheme(next)}>
      {next === "dark" ? "Dark" : "Light"} theme
    </button>
  );
}

export function Layout() {
  const { user, ready } = useSession();
  const location = useLocation();
  useEvents(user !== null);
  if (!ready) {
    return (
      <main id="main" className="centered" aria-busy="true">
        <p>Loading…</p>
      </main>
    );
  }
  if (!user) {
    const next = encodeURIComponent(location.pathname + location.search);
    return <Navigate to={`/login?next=${next}`} replace />;
  }
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <strong className="brand">tickwork</strong>
        <nav aria-label="Main">
          <NavLink to="/" end>
            Overview
          </NavLink>
          <NavLink to="/jobs">Jobs</NavLink>
          <NavLink to="/queues">Queues</NavLink>
        </nav>
        <div className="who">
          <span>
            {user.email} <span className="badge">{user.role}</span>
          </span>
          <ThemeToggle />
          <button type="button" className="secondary" onClick={() => void logout()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </>
  );
}
