import { describe, expect, it } from "vitest";
import type { RefusalTier } from "../../http/refusals.ts";
import { createX402Limits } from "./client-limit.ts";

// The x402 windows' rules (client-limit.ts): refused requests per address, signed payments per
// payer and per address. The acceptance against the real stack is x402-limits.int.test.ts.

const PAYER_A = "0x00000000000000000000000000000000000000aa";
const PAYER_B = "0x00000000000000000000000000000000000000bb";

/** A fresh authorization nonce: each call another payment. */
let nonces = 0;
const nonce = (): string => `0x${(++nonces).toString(16).padStart(64, "0")}`;

function limitsAt(perMinute: number, addressPaymentsPerMinute: number, readsPerMinute = 600) {
  let now = 1_000_000;
  const refused: RefusalTier[] = [];
  const limits = createX402Limits({
    perMinute,
    addressPaymentsPerMinute,
    readsPerMinute,
    now: () => now,
    refusals: (tier) => refused.push(tier),
  });
  return { limits, refused, advance: (ms: number) => (now += ms) };
}

describe("createX402Limits", () => {
  it("counts refused requests per address, IPv6 per /64, and past the limit says how long to wait", () => {
    const { limits, refused, advance } = limitsAt(2, 100);
    expect([limits.refused("203.0.113.7"), limits.refused("203.0.113.7")]).toEqual([undefined, undefined]);
    expect(limits.refused("203.0.113.7")).toBe(60);
    expect(limits.refused("203.0.113.8")).toBeUndefined();
    expect([limits.refused("2001:db8:1:2::1"), limits.refused("2001:db8:1:2::ffff")]).toEqual([
      undefined,
      undefined,
    ]);
    expect(limits.refused("2001:db8:1:2:aaaa::1")).toBe(60);
    expect(refused).toEqual(["x402_client", "x402_client"]);
    advance(60_000);
    expect(limits.refused("203.0.113.7")).toBeUndefined();
  });

  it("never counts an address's refused requests against the payments it carries", () => {
    // Mutation: payment() consuming the refused-requests window refuses the payer here.
    const { limits } = limitsAt(2, 100);
    const nat = "198.51.100.20";
    for (let i = 0; i < 10; i++) limits.refused(nat);
    expect(limits.refused(nat)).toBeGreaterThan(0);
    expect([limits.payment(nat, PAYER_A, nonce()), limits.payment(nat, PAYER_A, nonce())]).toEqual([
      undefined,
      undefined,
    ]);
  });

  it("counts payments per payer, whatever address they come from, and per address across payers", () => {
    const { limits, refused } = limitsAt(2, 3);
    expect(limits.payment("198.51.100.1", PAYER_A, nonce())).toBeUndefined();
    expect(
      limits.payment("198.51.100.2", PAYER_A.toUpperCase().replace("0X", "0x"), nonce()),
    ).toBeUndefined();
    // The payer's window is full, from any address.
    expect(limits.payment("198.51.100.3", PAYER_A, nonce())).toBe(60);
    // The address's budget: 3 payments across payers, then no more, whatever the payer.
    expect(limits.payment("198.51.100.1", PAYER_B, nonce())).toBeUndefined();
    expect(
      limits.payment("198.51.100.1", "0x00000000000000000000000000000000000000cc", nonce()),
    ).toBeUndefined();
    expect(limits.payment("198.51.100.1", "0x00000000000000000000000000000000000000dd", nonce())).toBe(60);
    expect(refused).toEqual(["x402_payer", "x402_client_payments"]);
  });

  it("counts nothing when one of the two windows refuses", () => {
    const { limits } = limitsAt(1, 10);
    expect(limits.payment("198.51.100.9", PAYER_A, nonce())).toBeUndefined();
    // Refused by the payer's window: the address's budget keeps its room for other payers.
    for (let i = 0; i < 20; i++) expect(limits.payment("198.51.100.9", PAYER_A, nonce())).toBe(60);
    expect(limits.payment("198.51.100.9", PAYER_B, nonce())).toBeUndefined();
  });

  it("counts one authorization once against its payer, however often and from wherever it is presented again; each time against the address", () => {
    // Mutation: counting every presentation against the payer (as before) refuses the payer's next
    // authorization here, its window filled by replays of its first.
    const { limits, refused } = limitsAt(2, 3);
    const first = nonce();
    expect(limits.payment("198.51.100.30", PAYER_A, first)).toBeUndefined();
    for (const ip of ["198.51.100.31", "198.51.100.32"])
      for (let i = 0; i < 3; i++)
        expect(limits.payment(ip, PAYER_A, first.toUpperCase().replace("0X", "0x"))).toBeUndefined();
    // Each replaying address held to its budget.
    expect(limits.payment("198.51.100.31", PAYER_A, first)).toBe(60);
    expect(limits.payment("198.51.100.30", PAYER_A, nonce())).toBeUndefined();
    expect(limits.payment("198.51.100.30", PAYER_A, nonce())).toBe(60);
    expect(refused).toEqual(["x402_client_payments", "x402_payer"]);
  });

  it("counts public reads per address, IPv6 per /64, in a window of their own", () => {
    // Mutation: read() consuming the refused-requests window refuses the address's junk here.
    const { limits, refused, advance } = limitsAt(2, 100, 3);
    const reader = "2001:db8:5:6::1";
    for (const ip of [reader, "2001:db8:5:6::2", "2001:db8:5:6:ffff::3"]) {
      expect(limits.read(ip)).toBeUndefined();
    }
    expect(limits.read("2001:db8:5:6::4")).toBe(60);
    expect(limits.read("2001:db8:5:7::1")).toBeUndefined();
    expect(limits.refused(reader)).toBeUndefined();
    expect(limits.offerSigning(reader)).toBe(true);
    expect(refused).toEqual(["x402_reads"]);
    advance(60_000);
    expect(limits.read(reader)).toBeUndefined();
  });
});
