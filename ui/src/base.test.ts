import { describe, expect, it } from "vitest";
import { mountedAt } from "./api";

function page(content: string | null): Document {
  const doc = document.implementation.createHTMLDocument("tickwork");
  if (content !== null) {
    const meta = doc.createElement("meta");
    meta.name = "tickwork-base";
    meta.content = content;
    doc.head.append(meta);
  }
  return doc;
}

describe("the path the dashboard is served under", () => {
  it("is empty at a server's root, or with no meta tag", () => {
    expect(mountedAt(page(""))).toBe("");
    expect(mountedAt(page("/"))).toBe("");
    expect(mountedAt(page(null))).toBe("");
  });

  it("is the mount path the server wrote, without a trailing slash", () => {
    expect(mountedAt(page("/tickwork"))).toBe("/tickwork");
    expect(mountedAt(page("/ops/tickwork/"))).toBe("/ops/tickwork");
  });

  it("is never another site or anything but a path", () => {
    const notPaths = ["//evil.example", "https://evil.example", "tickwork", "/\\evil", "/a?b", "/a#b"];
    for (const content of notPaths) {
      expect(mountedAt(page(content))).toBe("");
    }
  });
});
