import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CURSOR_PATTERN } from "./console-browse-schemas.ts";
import { isUuid } from "./uuid.ts";

describe("isUuid", () => {
  it("takes a UUID as Postgres and node:crypto write it", () => {
    expect(isUuid(randomUUID())).toBe(true);
    expect(isUuid("00000000-0000-0000-0000-000000000000")).toBe(true);
  });

  it.each([
    ["uppercase", "0F8FAD5B-D9CB-469F-A165-70867728950E"],
    ["braces", "{0f8fad5b-d9cb-469f-a165-70867728950e}"],
    ["no dashes", "0f8fad5bd9cb469fa16570867728950e"],
    ["a group one short", "0f8fad5b-d9cb-469f-a165-70867728950"],
    ["a trailing newline", "0f8fad5b-d9cb-469f-a165-70867728950e\n"],
    ["a NUL inside", "0f8fad5b-d9cb-469f-a165-7086\u00007728950e"],
    ["a dash out of place", "0f8fad5bd-9cb-469f-a165-70867728950e"],
    ["empty", ""],
  ])("refuses %s", (_, value) => {
    expect(isUuid(value)).toBe(false);
  });

  it("is the id half of a console page's cursor", () => {
    expect(CURSOR_PATTERN.test(`2026-12-05T09:00:00.123456Z_${randomUUID()}`)).toBe(true);
    expect(CURSOR_PATTERN.test("2026-12-05T09:00:00.123456Z_0f8fad5bd9cb469fa16570867728950e")).toBe(false);
  });
});
