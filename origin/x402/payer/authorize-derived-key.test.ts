import { describe, expect, it } from "vitest";
import { derivedKeyCandidates, derivedKeyWindow } from "./authorize-derived-key.ts";

const quote = (...timeouts: unknown[]) => ({
  resource: { url: "https://seller.example/thing" },
  accepts: timeouts.map((maxTimeoutSeconds) => ({ scheme: "exact", maxTimeoutSeconds })),
});

describe("derived x402 keys", () => {
  it("windows by the quote's longest timeout, at least 1 s and at most a day", () => {
    expect(derivedKeyWindow(quote(60))).toBe(60);
    expect(derivedKeyWindow(quote(30, 120, 45))).toBe(120);
    expect(derivedKeyWindow(quote())).toBe(1);
    expect(derivedKeyWindow(quote("60", -5, 1.5))).toBe(1);
    expect(derivedKeyWindow(quote(10_000_000))).toBe(86_400);
  });

  it("keeps the keys of a window, and hands its last window's key to the next as the previous", () => {
    const agentId = "00000000-0000-4000-8000-000000000001";
    const at = (nowSeconds: number) => derivedKeyCandidates({ agentId, quote: quote(60), nowSeconds });
    expect(at(600)).toEqual(at(659));
    expect(at(660).previous).toBe(at(600).current[0]);
    expect(new Set(at(600).current).size).toBe(8);
    // Another agent, resource or quote: other keys.
    const other = derivedKeyCandidates({
      agentId: agentId.replace(/1$/, "2"),
      quote: quote(60),
      nowSeconds: 600,
    });
    expect(other.current[0]).not.toBe(at(600).current[0]);
    expect(derivedKeyCandidates({ agentId, quote: quote(61), nowSeconds: 600 }).current[0]).not.toBe(
      at(600).current[0],
    );
  });
});
