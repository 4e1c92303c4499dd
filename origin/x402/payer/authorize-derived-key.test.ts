import { describe, expect, it } from "vitest";
import { legacyKeys, legacyKeyWindow } from "./authorize-legacy-keys.ts";
import { derivedPaymentKey, x402Purchase } from "./authorize-payment-key.ts";

const quote = (...timeouts: unknown[]) => ({
  resource: { url: "https://seller.example/thing" },
  accepts: timeouts.map((maxTimeoutSeconds) => ({ scheme: "exact", maxTimeoutSeconds })),
});
const agentId = "00000000-0000-4000-8000-000000000001";

describe("derived x402 keys", () => {
  it("name one purchase by the agent, the resource and the quote's terms, and each key by the one before it", () => {
    const purchase = x402Purchase({ agentId, quote: quote(60) });
    expect(purchase).toMatch(/^[0-9a-f]{64}$/);
    expect(x402Purchase({ agentId: agentId.replace(/1$/, "2"), quote: quote(60) })).not.toBe(purchase);
    expect(x402Purchase({ agentId, quote: quote(61) })).not.toBe(purchase);
    expect(
      x402Purchase({ agentId, quote: { ...quote(60), resource: { url: "https://seller.example/other" } } }),
    ).not.toBe(purchase);
    const first = derivedPaymentKey(purchase, null);
    expect(first).toMatch(/^x402-[0-9a-f]{64}$/);
    const second = derivedPaymentKey(purchase, first);
    expect(new Set([first, second, derivedPaymentKey(purchase, second)]).size).toBe(3);
    expect(derivedPaymentKey(purchase, first)).toBe(second);
  });

  it("finds the keys given before 0044: this window's and the last one's, windowed by the quote's longest timeout, at least 1 s and at most a day", () => {
    expect(legacyKeyWindow(quote(60))).toBe(60);
    expect(legacyKeyWindow(quote(30, 120, 45))).toBe(120);
    expect(legacyKeyWindow(quote())).toBe(1);
    expect(legacyKeyWindow(quote("60", -5, 1.5))).toBe(1);
    expect(legacyKeyWindow(quote(10_000_000))).toBe(86_400);
    const at = (nowSeconds: number) => legacyKeys({ agentId, quote: quote(60), nowSeconds });
    expect(at(600)).toEqual(at(659));
    expect(new Set(at(600)).size).toBe(16);
    expect(at(660).slice(0, 8)).toEqual(at(600).slice(8));
    // As the keys were derived before 0044 (window 10's first, window 9's last), computed then.
    expect(at(600)[8]).toBe("x402-5d039af4de3620dde07fb712f64abeb55820f302fb30d6c050f99f953ccdcfc9");
    expect(at(600)[7]).toBe("x402-6d93fd79fad9376988a0d10e513cd91738b5e9e043750830c0d0a008543d576c");
  });
});
