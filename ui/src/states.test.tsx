import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { ApiError } from "./api";
import { Failure } from "./components/States";

describe("Failure", () => {
  it("says plainly that a role was refused, and what to do", () => {
    render(<Failure error={new ApiError(403, { status: 403, title: "Forbidden", detail: "needs OPERATOR" })} />);
    expect(screen.getByRole("alert").textContent).toContain("Not allowed.");
    expect(screen.getByRole("alert").textContent).toContain("Ask an administrator");
  });

  it("names the field a 400 refused", () => {
    const problem = {
      status: 400,
      title: "Invalid input",
      detail: "queue ('') must be 1 to 200 characters",
      field: "queue",
    };
    render(<Failure error={new ApiError(400, problem)} />);
    expect(screen.getByRole("alert").textContent).toContain("Field: queue");
    expect(screen.getByRole("alert").textContent).toContain("must be 1 to 200 characters");
  });

  it("tells that the database is down and that the page tries again", () => {
    render(<Failure error={new ApiError(503, { status: 503, title: "Unavailable", detail: "no connection" })} />);
    expect(screen.getByRole("alert").textContent).toContain("tries again by itself");
  });
});
