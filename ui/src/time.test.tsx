import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { age, Time, utc } from "./time";

describe("times", () => {
  it("shows the browser's time with UTC on hover", () => {
    render(<Time value="2026-12-06T03:04:05.123456+00:00" />);
    const shown = screen.getByText((_, node) => node?.tagName === "TIME");
    expect(shown.getAttribute("title")).toBe("2026-12-06 03:04:05 UTC");
    expect(shown.getAttribute("dateTime")).toBe("2026-12-06T03:04:05.123456+00:00");
  });

  it("says plainly when there is no time", () => {
    render(<Time value={null} />);
    expect(screen.getByLabelText("none").textContent).toBe("-");
  });

  it("writes ages for people", () => {
    expect(age(null)).toBe("-");
    expect(age(12.4)).toBe("12 s");
    expect(age(185)).toBe("3 min");
    expect(age(7500)).toBe("2 h 5 min");
    expect(utc("2026-01-02T00:00:00Z")).toBe("2026-01-02 00:00:00 UTC");
  });
});
