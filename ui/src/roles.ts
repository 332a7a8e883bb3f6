// Role gating from the API's own route table (GET /api/routes, made from ROUTE_ROLES): the
// dashboard never shows an action the API would refuse the signed-in role.
import type { Role } from "./api";

export const RANK: Record<Role, number> = { VIEWER: 1, OPERATOR: 2, ADMIN: 3 };

export interface RouteRole {
  method: string;
  path: string;
  role: Role | null;
}

export type RouteTable = Map<string, Role | null>;

export function routeTable(routes: RouteRole[]): RouteTable {
  return new Map(routes.map((r) => [`${r.method} ${r.path}`, r.role]));
}

/** Whether ``role`` may call ``method path`` (the path as the table writes it, with its
 * placeholders: "/api/jobs/{job_id}/retry"). A route missing from the table is refused. */
export function can(table: RouteTable, role: Role | undefined, method: string, path: string) {
  if (!role) return false;
  const needed = table.get(`${method} ${path}`);
  if (needed === undefined) return false;
  return needed === null || RANK[role] >= RANK[needed];
}
