import { describe, expect, it } from "vitest";
import { bearerCredentials } from "./authorization.ts";

describe("bearerCredentials", () => {
  it("reads the credentials after a bearer scheme of any case and one or more spaces", () => {
    expect(bearerCredentials("Bearer abc")).toBe("abc");
    expect(bearerCredentials("bearer abc")).toBe("abc");
    expect(bearerCredentials("BEARER    abc")).toBe("abc");
  });

  it("gives nothing for another scheme, no separator, no credentials or a second word", () => {
    for (const header of [undefined, "", "Basic abc", "Bearerabc", "Bearer ", "Bearer a b", " Bearer abc"]) {
      expect(bearerCredentials(header), String(header)).toBeUndefined();
    }
  });
});
