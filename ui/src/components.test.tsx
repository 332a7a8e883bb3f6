import { render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";
import { CRON_LABEL, CronField } from "./components/CronField";
import { LiveOutput } from "./components/LiveOutput";
import { Pager } from "./listing";
import type { Job } from "./types";

const running: Job = {
  id: 7,
  queue: "scripts-bash",
  task: "tickwork.script",
  args: {},
  state: "RUNNING",
  priority: 0,
  attempts: 1,
  max_attempts: 1,
  run_at: "2026-12-06T05:00:00Z",
  created_at: "2026-12-06T05:00:00Z",
  created_by: "user:a@example.com",
  result: null,
  finished_at: null,
  cancel_requested_at: null,
  error: null,
  omitted: [],
};

describe("LiveOutput", () => {
  it("shows what a running script wrote so far, each stream labelled", () => {
    const progress = {
      current: 20,
      total: null,
      message: "output",
      attempt: 1,
      at: null,
      output: { stdout: "step 1 done\n", stderr: "warning: slow\n" },
    };
    render(<LiveOutput job={{ ...running, progress }} />);
    expect(screen.getByLabelText("Standard output so far").textContent).toBe("step 1 done\n");
    expect(screen.getByLabelText("Standard error so far").textContent).toBe("warning: slow\n");
  });

  it("shows nothing for a job that reported no output", () => {
    const { container } = render(<LiveOutput job={running} />);
    expect(container.textContent).toBe("");
  });
});

describe("Pager", () => {
  it("keeps the filter (and a search) on the older page, and offers the newest", () => {
    const filter = new URLSearchParams({ q: "acme", state: "FAILED" });
    render(
      <MemoryRouter>
        <Pager base="/jobs" filter={filter} before="90" next={40} />
      </MemoryRouter>,
    );
    expect(screen.getByRole("link", { name: "Older" }).getAttribute("href")).toBe(
      "/jobs?q=acme&state=FAILED&before_id=40",
    );
    expect(screen.getByRole("link", { name: "Newest" }).getAttribute("href")).toBe(
      "/jobs?q=acme&state=FAILED",
    );
  });

  it("offers no older page at the end", () => {
    render(
      <MemoryRouter>
        <Pager base="/jobs" filter={new URLSearchParams()} before={null} next={null} />
      </MemoryRouter>,
    );
    expect(screen.queryByRole("link")).toBeNull();
  });
});

describe("CronField", () => {
  it("says it takes 5 fields, 6 with seconds first or an alias, and the limit", () => {
    render(<CronField required defaultValue="30 */5 * * * *" />);
    const input = screen.getByLabelText(CRON_LABEL);
    expect(CRON_LABEL).toBe("Cron (5 fields, or 6 with seconds first)");
    expect((input as HTMLInputElement).value).toBe("30 */5 * * * *");
    expect(input).toHaveProperty("required", true);
    expect(input.getAttribute("name")).toBe("cron");
    const help = document.getElementById(input.getAttribute("aria-describedby") ?? "");
    expect(help?.textContent).toContain("minute hour day month weekday");
    expect(help?.textContent).toContain("seconds first");
    const aliases = ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"];
    for (const alias of aliases) {
      expect(help?.textContent).toContain(alias);
    }
    expect(help?.textContent).toContain("time zone");
    expect(help?.textContent).toContain("at most one fire time per second");
    expect(help?.textContent).toContain("scheduler.min_interval");
  });

  it("says what an empty field means where it may be empty", () => {
    render(<CronField empty="only run by hand or webhook" />);
    const input = screen.getByLabelText(CRON_LABEL);
    expect(input).toHaveProperty("required", false);
    const help = document.getElementById(input.getAttribute("aria-describedby") ?? "");
    expect(help?.textContent).toContain("empty: only run by hand or webhook");
  });
});
