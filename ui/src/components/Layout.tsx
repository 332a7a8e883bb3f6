import { useEffect, useState } from "react";
import { Navigate, NavLink, Outlet, useLocation } from "react-router";
import { logout } from "../api";
import { useEvents } from "../live";
import { useSession } from "../session";

type Theme = "light" | "dark";

/** The main pages, each shown to the roles that may read what it shows. */
const PAGES = [
  { to: "/", label: "Overview", reads: "/api/queues" },
  { to: "/jobs", label: "Jobs", reads: "/api/jobs" },
  { to: "/queues", label: "Queues", reads: "/api/queues" },
  { to: "/schedules", label: "Schedules", reads: "/api/schedules" },
  { to: "/definitions", label: "Definitions", reads: "/api/definitions" },
  { to: "/workers", label: "Workers", reads: "/api/workers" },
  { to: "/signals", label: "Signals", reads: "/api/admin/signals/stats" },
  { to: "/audit", label: "Audit", reads: "/api/audit" },
  { to: "/users", label: "Users", reads: "/api/users" },
  { to: "/settings", label: "Settings", reads: "/api/variables" },
];

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
  const { user, ready, can } = useSession();
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
          {PAGES.filter((p) => can("GET", p.reads)).map((p) => (
            <NavLink key={p.to} to={p.to} end={p.to === "/"}>
              {p.label}
            </NavLink>
          ))}
        </nav>
        <div className="who">
          <NavLink to="/account">
            {user.email} <span className="badge">{user.role}</span>
          </NavLink>
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
