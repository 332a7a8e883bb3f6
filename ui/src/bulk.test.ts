import { describe, expect, it } from "vitest";
import { bulkBody } from "./bulk";

describe("bulkBody", () => {
  it("sends the listing's filter", () => {
    const body = bulkBody(new URLSearchParams("state=DEAD_LETTER&queue=mail"));
    expect(body).toEqual({ state: ["DEAD_LETTER"], queue: "mail" });
    expect(body.all).toBeUndefined();
  });

  it("says all: true when no filter is set, never an empty filter", () => {
    expect(JSON.parse(JSON.stringify(bulkBody(new URLSearchParams())))).toEqual({ all: true });
  });

  it("ignores the text search, which a bulk action does not take", () => {
    expect(JSON.parse(JSON.stringify(bulkBody(new URLSearchParams("q=boom"))))).toEqual({
      all: true,
    });
  });
});
