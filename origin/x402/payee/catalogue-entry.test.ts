import { describe, expect, it } from "vitest";
import {
  catalogueEntry,
  MAX_DESCRIPTION_LENGTH,
  MAX_RESOURCE_URL_LENGTH,
  settledResourceOf,
} from "./catalogue-entry.ts";

// What the discovery catalogue accepts as a resource (catalogue-entry.ts); the operator's tool and
// the settled payments' path both go through these rules (ops/x402-resources.int.test.ts and
// discovery.int.test.ts exercise them end to end).

const longUrl = (length: number) => {
  const head = "https://seller.example/";
  return head + "a".repeat(length - head.length);
};

describe("catalogueEntry", () => {
  it.each([
    ["an https URL", { url: "https://seller.example/weather" }, "https://seller.example/weather"],
    [
      "the parser's spelling",
      { url: "HTTPS://Seller.Example:443/a/../b?q=1" },
      "https://seller.example/b?q=1",
    ],
    ["an http URL at the limit", { url: longUrl(MAX_RESOURCE_URL_LENGTH) }, longUrl(MAX_RESOURCE_URL_LENGTH)],
  ])("accepts %s", (_, params, url) => {
    expect(catalogueEntry(params)).toEqual({ ok: true, value: { url, description: "", mimeType: null } });
  });

  it.each([
    ["a relative URL", { url: "/weather" }, "url"],
    ["another scheme", { url: "ftp://seller.example/x" }, "url"],
    ["a javascript: URL", { url: "javascript:alert(1)" }, "url"],
    ["credentials", { url: "https://user:pw@seller.example/x" }, "url"],
    ["a URL one over the limit", { url: longUrl(MAX_RESOURCE_URL_LENGTH + 1) }, "url"],
    [
      "a description one over the limit",
      { url: "https://a.example/", description: "d".repeat(MAX_DESCRIPTION_LENGTH + 1) },
      "description",
    ],
    ["a description holding a NUL", { url: "https://a.example/", description: "w\u0000x" }, "description"],
    [
      "a description holding an escape",
      { url: "https://a.example/", description: "\u001b[2J" },
      "description",
    ],
    [
      "a description holding a lone surrogate",
      { url: "https://a.example/", description: "snow \ud83d fall" },
      "description",
    ],
    ["a MIME type without a subtype", { url: "https://a.example/", mimeType: "json" }, "mime_type"],
    ["a MIME type with spaces", { url: "https://a.example/", mimeType: "text/ html" }, "mime_type"],
  ])("refuses %s, naming the field", (_, params, field) => {
    const result = catalogueEntry(params);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.field).toBe(field);
  });

  it("keeps a description holding a character outside the BMP (a surrogate pair)", () => {
    expect(catalogueEntry({ url: "https://a.example/", description: "snow \u{1F328}" })).toMatchObject({
      ok: true,
      value: { description: "snow \u{1F328}" },
    });
  });

  it("keeps a description at the limit, trimmed, and a MIME type", () => {
    const description = "w".repeat(MAX_DESCRIPTION_LENGTH);
    expect(
      catalogueEntry({
        url: "https://a.example/",
        description: `  ${description} `,
        mimeType: "application/json",
      }),
    ).toEqual({ ok: true, value: { url: "https://a.example/", description, mimeType: "application/json" } });
  });
});

describe("settledResourceOf", () => {
  it.each([
    ["no resource", undefined],
    ["a string", "https://a.example/"],
    ["a URL that is no string", { url: 7 }],
    ["a description that is no string", { url: "https://a.example/", description: ["x"] }],
    ["a URL over the limit", { url: longUrl(MAX_RESOURCE_URL_LENGTH + 1) }],
    [
      "a description over the limit",
      { url: "https://a.example/", description: "d".repeat(MAX_DESCRIPTION_LENGTH + 1) },
    ],
  ])("lists nothing for %s", (_, resource) => {
    expect(settledResourceOf(resource)).toBeUndefined();
  });

  it("lists the resource a quote names as the quote gave it", () => {
    expect(
      settledResourceOf({
        url: "https://a.example/w",
        description: "Weather now",
        mimeType: "application/json",
      }),
    ).toEqual({ url: "https://a.example/w", description: "Weather now", mimeType: "application/json" });
  });

  it("reads a null description or MIME type as none, as x402's schemas do", () => {
    expect(settledResourceOf({ url: "https://a.example/w", description: null, mimeType: null })).toEqual({
      url: "https://a.example/w",
      description: "",
      mimeType: null,
    });
  });
});
