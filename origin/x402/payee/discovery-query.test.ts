import { describe, expect, it } from "vitest";
import {
  DEFAULT_LIMIT,
  filtersPass,
  MAX_LIMIT,
  MAX_OFFSET,
  MAX_QUERY_LENGTH,
  parseListQuery,
  parseSearchQuery,
} from "./discovery-query.ts";

// The discovery routes' query rules (discovery-query.ts); the official client against the real
// stack is discovery.int.test.ts.

describe("parseListQuery", () => {
  it.each([
    ["nothing", {}, { limit: DEFAULT_LIMIT, offset: 0 }],
    ["a page", { limit: "5", offset: "10" }, { limit: 5, offset: 10 }],
    ["a limit over the maximum, served as the maximum", { limit: "1000" }, { limit: MAX_LIMIT, offset: 0 }],
    ["the deepest offset", { offset: String(MAX_OFFSET) }, { limit: DEFAULT_LIMIT, offset: MAX_OFFSET }],
  ])("reads %s", (_, params, page) => {
    expect(parseListQuery(params)).toEqual({ ok: true, value: { filters: {}, words: [], ...page } });
  });

  it.each([
    ["limit 0", { limit: "0" }, /limit/],
    ["a negative limit", { limit: "-1" }, /limit/],
    ["a limit that is no number", { limit: "ten" }, /limit/],
    ["a fractional limit", { limit: "2.5" }, /limit/],
    ["a negative offset", { offset: "-1" }, /offset/],
    ["an offset past the deepest", { offset: String(MAX_OFFSET + 1) }, /offset/],
  ])("refuses %s, naming the parameter", (_, params, message) => {
    const result = parseListQuery(params);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(message);
  });

  it("keeps the filters the client sent", () => {
    const result = parseListQuery({ type: "http", payTo: "0xAb", network: "eip155:77", scheme: "exact" });
    expect(result.ok && result.value.filters).toEqual({
      type: "http",
      payTo: "0xAb",
      network: "eip155:77",
      scheme: "exact",
    });
  });
});

describe("parseSearchQuery", () => {
  it("splits the query into distinct lowercase words, and reads the cursor as the offset", () => {
    expect(parseSearchQuery({ query: "  Paid JSON\tpaid ", cursor: "20", limit: "10" })).toEqual({
      ok: true,
      value: { filters: {}, words: ["paid", "json"], limit: 10, offset: 20 },
    });
  });

  it.each([
    ["no query", {}, /query is required/],
    ["a blank query", { query: "   " }, /query is required/],
    ["a query one over the limit", { query: "q".repeat(MAX_QUERY_LENGTH + 1) }, /over 200 characters/],
    ["nine words", { query: "a b c d e f g h i" }, /over 8 words/],
    // Postgres text cannot hold NUL: the catalogue's query would fail, not match nothing.
    ["a NUL", { query: "demo\u0000" }, /control characters/],
    ["a DEL", { query: "de\u007fmo json" }, /control characters/],
    ["a cursor of another facilitator", { query: "demo", cursor: "eyJvZmZzZXQiOjF9" }, /cursor/],
  ])("refuses %s", (_, params, message) => {
    const result = parseSearchQuery(params);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(message);
  });

  it("accepts a query at the limit", () => {
    expect(parseSearchQuery({ query: "q".repeat(MAX_QUERY_LENGTH) }).ok).toBe(true);
  });
});

describe("filtersPass", () => {
  const requirement = {
    scheme: "exact",
    network: "eip155:77",
    payTo: "0x00000000000000000000000000000000000000aa",
  };
  it.each([
    [{}, true],
    [{ type: "http" }, true],
    [{ type: "mcp" }, false],
    [{ scheme: "exact", network: "eip155:77" }, true],
    [{ scheme: "upto" }, false],
    [{ network: "eip155:8453" }, false],
    [{ payTo: "0x00000000000000000000000000000000000000AA" }, true],
    [{ payTo: "0x00000000000000000000000000000000000000bb" }, false],
    [{ extensions: "bazaar" }, false],
  ])("%j → %s", (filters, passes) => {
    expect(filtersPass(filters, requirement)).toBe(passes);
  });
});
