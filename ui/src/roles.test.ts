import { describe, expect, it } from "vitest";
import { can, routeTable } from "./roles";

const table = routeTable([
  { method: "GET", path: "/api/jobs", role: "VIEWER" },
  { method: "POST", path: "/api/jobs/{job_id}/retry", role: "OPERATOR" },
  { method: "GET", path: "/api/users", role: "ADMIN" },
  { method: "POST", path: "/api/auth/login", role: null },
]);

describe("can", () => {
  it("lets a role call what it or a weaker role may", () => {
    expect(can(table, "VIEWER", "GET", "/api/jobs")).toBe(true);
    expect(can(table, "ADMIN", "POST", "/api/jobs/{job_id}/retry")).toBe(true);
    expect(can(table, "OPERATOR", "POST", "/api/jobs/{job_id}/retry")).toBe(true);
  });

  it("refuses what needs a stronger role", () => {
    expect(can(table, "VIEWER", "POST", "/api/jobs/{job_id}/retry")).toBe(false);
    expect(can(table, "OPERATOR", "GET", "/api/users")).toBe(false);
  });

  it("fails closed: no user, or a route the table does not have", () => {
    expect(can(table, undefined, "GET", "/api/jobs")).toBe(false);
    expect(can(table, "ADMIN", "DELETE", "/api/jobs")).toBe(false);
    expect(can(routeTable([]), "ADMIN", "GET", "/api/jobs")).toBe(false);
  });

  it("lets anyone signed in call a public route", () => {
    expect(can(table, "VIEWER", "POST", "/api/auth/login")).toBe(true);
  });
});
