import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { createBrowserRouter, RouterProvider } from "react-router";
import { ApiError } from "./api";
import { Layout } from "./components/Layout";
import { AccountPage } from "./pages/Account";
import { AuditPage } from "./pages/Audit";
import { DefinitionPage, DefinitionsPage, NewDefinitionPage } from "./pages/Definitions";
import { InvitePage } from "./pages/Invite";
import { JobPage } from "./pages/Job";
import { JobsPage } from "./pages/Jobs";
import { LoginPage } from "./pages/Login";
import { NotFoundPage } from "./pages/NotFound";
import { OverviewPage } from "./pages/Overview";
import { QueuesPage } from "./pages/Queues";
import { SchedulesPage } from "./pages/Schedules";
import { SettingsPage } from "./pages/Settings";
import { SignalPage } from "./pages/Signal";
import { SignalsPage } from "./pages/Signals";
import { UsersPage } from "./pages/Users";
import { WorkersPage } from "./pages/Workers";
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

const router = createBrowserRouter([
  { path: "/login", element: <LoginPage /> },
  { path: "/invite", element: <InvitePage /> },
  {
    element: <Layout />,
    children: [
      { path: "/", element: <OverviewPage /> },
      { path: "/jobs", element: <JobsPage /> },
      { path: "/jobs/:id", element: <JobPage /> },
      { path: "/queues", element: <QueuesPage /> },
      { path: "/schedules", element: <SchedulesPage /> },
      { path: "/definitions", element: <DefinitionsPage /> },
      { path: "/definitions/new", element: <NewDefinitionPage /> },
      { path: "/definitions/:id", element: <DefinitionPage /> },
      { path: "/workers", element: <WorkersPage /> },
      { path: "/signals", element: <SignalsPage /> },
      { path: "/signals/:id", element: <SignalPage /> },
      { path: "/audit", element: <AuditPage /> },
      { path: "/users", element: <UsersPage /> },
      { path: "/settings", element: <SettingsPage /> },
      { path: "/account", element: <AccountPage /> },
      { path: "*", element: <NotFoundPage /> },
    ],
  },
]);

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queries}>
      <SessionProvider>
        <RouterProvider router={router} />
      </SessionProvider>
    </QueryClientProvider>
  </StrictMode>,
);
