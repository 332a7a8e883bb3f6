import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode, type ComponentType } from "react";
import { createRoot } from "react-dom/client";
import { createBrowserRouter, RouterProvider } from "react-router";
import { ApiError, BASE } from "./api";
import { Layout } from "./components/Layout";
import { LoginPage } from "./pages/Login";
import { SessionProvider } from "./session";
import "./styles.css";

const queries = new QueryClient({
  defaultOptions: {
    queries: {
      // a refused or missing resource is an answer, not a fault to try again
      retry: (count, error) =>
        !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: true,
    },
  },
});

/** A page loaded when first visited: each page is its own chunk, so the first load carries
 * the shell and the page asked for, not every page's libraries (charts, the code editor). */
function page<M>(load: () => Promise<M>, name: keyof M) {
  return async () => ({ Component: (await load())[name] as ComponentType });
}

const router = createBrowserRouter([
  { path: "/login", element: <LoginPage /> },
  { path: "/invite", lazy: page(() => import("./pages/Invite"), "InvitePage") },
  {
    element: <Layout />,
    children: [
      { path: "/", lazy: page(() => import("./pages/Overview"), "OverviewPage") },
      { path: "/jobs", lazy: page(() => import("./pages/Jobs"), "JobsPage") },
      { path: "/jobs/:id", lazy: page(() => import("./pages/Job"), "JobPage") },
      { path: "/queues", lazy: page(() => import("./pages/Queues"), "QueuesPage") },
      { path: "/schedules", lazy: page(() => import("./pages/Schedules"), "SchedulesPage") },
      { path: "/definitions", lazy: page(() => import("./pages/Definitions"), "DefinitionsPage") },
      {
        path: "/definitions/new",
        lazy: page(() => import("./pages/Definitions"), "NewDefinitionPage"),
      },
      {
        path: "/definitions/:id",
        lazy: page(() => import("./pages/Definitions"), "DefinitionPage"),
      },
      { path: "/workers", lazy: page(() => import("./pages/Workers"), "WorkersPage") },
      { path: "/signals", lazy: page(() => import("./pages/Signals"), "SignalsPage") },
      { path: "/signals/:id", lazy: page(() => import("./pages/Signal"), "SignalPage") },
      { path: "/audit", lazy: page(() => import("./pages/Audit"), "AuditPage") },
      { path: "/users", lazy: page(() => import("./pages/Users"), "UsersPage") },
      { path: "/settings", lazy: page(() => import("./pages/Settings"), "SettingsPage") },
      { path: "/account", lazy: page(() => import("./pages/Account"), "AccountPage") },
      { path: "*", lazy: page(() => import("./pages/NotFound"), "NotFoundPage") },
    ],
  },
], { basename: BASE || "/" });

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queries}>
      <SessionProvider>
        <RouterProvider router={router} />
      </SessionProvider>
    </QueryClientProvider>
  </StrictMode>,
);
