// The signed-in user and the API's route table, for every page.
import { useQuery } from "@tanstack/react-query";
import { createContext, useContext, useEffect, useState, type ReactNode } from "react";
import { api, onSession, refresh, type User } from "./api";
import { can as allowed, routeTable, type RouteRole, type RouteTable } from "./roles";

interface Session {
  user: User | null;
  ready: boolean;
  can: (method: string, path: string) => boolean;
}

const SessionContext = createContext<Session>({ user: null, ready: false, can: () => false });

export function SessionProvider({ children }: { children: ReactNode }) {
  const [user, setUser] = useState<User | null>(null);
  const [ready, setReady] = useState(false);
  useEffect(() => {
    const stop = onSession(setUser);
    refresh()
      .then(setUser)
      .finally(() => setReady(true));
    return () => {
      stop();
    };
  }, []);
  const routes = useQuery({
    queryKey: ["routes", user?.id],
    queryFn: () => api<RouteRole[]>("/api/routes"),
    enabled: user !== null,
    staleTime: Infinity,
  });
  const table: RouteTable = routeTable(routes.data ?? []);
  const can = (method: string, path: string) => allowed(table, user?.role, method, path);
  return <SessionContext.Provider value={{ user, ready, can }}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  return useContext(SessionContext);
}
