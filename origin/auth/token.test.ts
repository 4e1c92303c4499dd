import { describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { hashSecret, issueToken, secretMatches } from "./token.ts";

describe("token secrets", () => {
  it("stores SHA-256 of the secret's raw bytes, so the hashes of tokens issued earlier still match", () => {
    // SHA-256 of 32 zero bytes, a published answer: not of the 64 hex characters.
    expect(hashSecret("00".repeat(32)).toString("hex")).toBe(
      "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925",
    );
  });

  it("matches an issued token's secret against its stored hash, and nothing else", () => {
    const issued = issueToken();
    const parsed = parseBearerHeader(`Bearer ${issued.token}`)!;
    expect(parsed.tokenId).toBe(issued.tokenId);
    expect(secretMatches(parsed.secret, issued.secretHash)).toBe(true);
    expect(
      secretMatches(
        `${parsed.secret.slice(0, -1)}${parsed.secret.endsWith("0") ? "1" : "0"}`,
        issued.secretHash,
      ),
    ).toBe(false);
  });
});
