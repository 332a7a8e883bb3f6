// What a page shows while it loads, when it failed and when it has nothing yet.
import type { ReactNode } from "react";
import { ApiError } from "../api";
import { useSession } from "../session";

export function Loading({ what }: { what: string }) {
  return (
    <p role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Failure({ error }: { error: unknown }) {
  const { user } = useSession();
  if (error instanceof ApiError) {
    if (error.status === 403) {
      return (
        <div role="alert" className="problem">
          <strong>Not allowed.</strong> Your role ({user?.role}) cannot do this: {error.message}.
          Ask an administrator for a stronger role.
        </div>
      );
    }
    if (error.status === 503) {
      return (
        <div role="alert" className="problem">
          <strong>The database is unreachable.</strong> {error.message}. The page tries again
          by itself.
        </div>
      );
    }
    return (
      <div role="alert" className="problem">
        <strong>{error.problem.title}.</strong> {error.message}
        {error.problem.field && <p>Field: {error.problem.field}</p>}
      </div>
    );
  }
  return (
    <div role="alert" className="problem">
      <strong>Something went wrong.</strong> {String(error)}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}
