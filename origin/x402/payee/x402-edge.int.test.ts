import type { PaymentPayload } from "@x402/core/types";
import { sql } from "drizzle-orm";
import type { Address, Hex, PrivateKeyAccount } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { HEADER_EDGE_SECRET, HEADER_REQUEST_URL, WEI_PER_UNIT } from "../../../shared/constants.ts";
import { sleep } from "../../../shared/sleep.ts";
import { type EdgeHandle, startTestEdge, useStackEdge } from "../../../testing/edge.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelope, envelopeWithWindow, fundedPayer, quote } from "../../../testing/x402-payer.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// The x402 surfaces attacked from the public side of the edge, every part real (the edge worker in
// Miniflare, the origin, the enclave, the devnet, Postgres): settle attempts the chain would revert
// must never be signed, a client's refused verify, settle and paid requests are held to its
// window, and the quote never names the origin's private URL.
const EDGE_SECRET = "x402-edge-attack-secret-0123456789abcdef0123456789";
const AMOUNT = 10_000n;
const MARGIN_SECONDS = 6n;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    env: {
      AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
      AGENT_X402_VALIDITY_MARGIN_SECONDS: MARGIN_SECONDS.toString(),
      AGENT_X402_RECEIPT_TIMEOUT_MS: "60000",
    },
  },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET, { directSocket: true });

const chain = () => publicClientFor(stack.devnet.url);
type Settled = { success: boolean; errorReason?: string; transaction: string };

/** POST {edge}/77/x402/facilitator/settle, as any client on the network may. */
async function settleThroughEdge(payload: PaymentPayload): Promise<Settled> {
  const response = await fetch(`${edge.url}/77/x402/facilitator/settle`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted }),
  });
  const settled = (await response.json()) as Settled;
  // A settle that did not pay is never 200 (a client must not take it for a settlement).
  expect(response.status, JSON.stringify(settled)).toBe(settled.success ? 200 : 400);
  return settled;
}

/** How many times each value occurs: a failed expectation then shows every kind that came back. */
function tally(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

describe("settle attempts the chain would revert (acceptance: 300 through the edge)", () => {
  it("near-boundary windows and 16 authorizations against a balance covering 2: 0 reverted, only the payable settle, the settler pays only their gas", async () => {
    const quoted = await quote(`${edge.url}/77/x402/demo`);
    // Funded payers, so that nothing but the window stops the boundary attempts.
    const boundaryPayers = await Promise.all(Array.from({ length: 8 }, () => fundedPayer(stack.devnet.url)));
    const honest = await Promise.all(Array.from({ length: 4 }, () => fundedPayer(stack.devnet.url)));
    const short = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
    const settler = stack.settler!;
    const settlerBefore = await chain().getBalance({ address: settler });

    // Five waves, one a second, each presented at the start of its second `at`, as the finding's
    // client did: 24 valid from `at` itself (validAfter = now), 20 expiring 1 to 5 s after it
    // (inside the margin), 12 expired. With the first wave, all at once, the 16 authorizations of
    // a payer whose balance covers two, and 4 honest payments (the official client's window).
    const WAVES = 5;
    const start = BigInt(Math.floor(Date.now() / 1000)) + 5n;
    const waves: Array<{ at: bigint; payloads: Array<{ kind: string; payload: PaymentPayload }> }> = [];
    let n = 0;
    const payer = (): PrivateKeyAccount => boundaryPayers[n++ % boundaryPayers.length]!;
    for (let w = 0; w < WAVES; w++) {
      const at = start + BigInt(w);
      const payloads: Array<{ kind: string; payload: PaymentPayload }> = [];
      for (let i = 0; i < 24; i++) {
        const window = { validAfter: at, validBefore: at + 50n };
        payloads.push({
          kind: "validAfter = now",
          payload: await envelopeWithWindow(quoted, payer(), window),
        });
      }
      for (let i = 0; i < 20; i++) {
        const window = { validAfter: 0n, validBefore: at + 1n + BigInt(i % 5) };
        payloads.push({
          kind: "inside the margin",
          payload: await envelopeWithWindow(quoted, payer(), window),
        });
      }
      for (let i = 0; i < 12; i++) {
        const window = { validAfter: 0n, validBefore: at - 1n - BigInt(i % 3) };
        payloads.push({ kind: "expired", payload: await envelopeWithWindow(quoted, payer(), window) });
      }
      waves.push({ at, payloads });
    }
    const payable = { validAfter: 0n, validBefore: start + 60n };
    for (let i = 0; i < 16; i++) {
      waves[0]!.payloads.push({
        kind: "over balance",
        payload: await envelopeWithWindow(quoted, short, payable),
      });
    }
    for (const account of honest) {
      waves[0]!.payloads.push({
        kind: "honest",
        payload: await envelope(`${edge.url}/77/x402/demo`, account),
      });
    }
    expect(waves.reduce((sum, wave) => sum + wave.payloads.length, 0)).toBe(300);

    const answers: Array<Promise<{ kind: string; settled: Settled }>> = [];
    for (const wave of waves) {
      const waitMs = Number(wave.at) * 1000 - Date.now();
      expect(waitMs, "signing took longer than the lead time").toBeGreaterThan(0);
      await sleep(waitMs);
      for (const { kind, payload } of wave.payloads) {
        answers.push(settleThroughEdge(payload).then((settled) => ({ kind, settled })));
      }
    }
    const settled = await Promise.all(answers);

    // A payment valid from the second it is presented is refused while it is checked within the
    // margin (6 s) of that second. On a machine loaded enough to check it later than that, it is
    // payable by then and settles, without a revert: what this test holds to is that nothing the
    // settler signs reverts, so such a late one is counted with the payable.
    const lateValid = settled.filter(
      ({ kind, settled }) => kind === "validAfter = now" && settled.success,
    ).length;
    expect(
      tally(
        settled.map(({ kind, settled }) =>
          kind === "validAfter = now" && settled.success
            ? "validAfter = now: settled, checked past the margin"
            : `${kind}: ${settled.success ? "settled" : settled.errorReason}`,
        ),
      ),
    ).toEqual({
      [`validAfter = now: ${X402_REASONS.validAfter}`]: 24 * WAVES - lateValid,
      ...(lateValid > 0 ? { "validAfter = now: settled, checked past the margin": lateValid } : {}),
      [`inside the margin: ${X402_REASONS.validBefore}`]: 20 * WAVES,
      [`expired: ${X402_REASONS.validBefore}`]: 12 * WAVES,
      [`over balance: ${X402_REASONS.insufficientBalance}`]: 14,
      "over balance: settled": 2,
      "honest: settled": 4,
    });

    // Nothing reverted on chain, nothing left claimed: the rows are the six payable payments (and
    // any checked past the margin).
    const payers = [...boundaryPayers, ...honest, short].map((account) => account.address.toLowerCase());
    const rows = await queryRows<{ status: string; tx_hash: string }>(
      stack.db.handle.db,
      sql`select status, tx_hash from x402_settlements where payer = any(${`{${payers.join(",")}}`}::text[])`,
    );
    expect(tally(rows.map((row) => row.status))).toEqual({ settled: 6 + lateValid });
    const receipts = await Promise.all(
      rows.map((row) => chain().getTransactionReceipt({ hash: row.tx_hash as Hex })),
    );
    expect(tally(receipts.map((receipt) => receipt.status))).toEqual({ success: 6 + lateValid });
    // The settler's balance moved by the gas of those and nothing else.
    const fees = receipts.reduce((sum, receipt) => sum + receipt.gasUsed * receipt.effectiveGasPrice, 0n);
    expect(settlerBefore - (await chain().getBalance({ address: settler }))).toBe(fees);
    expect(await chain().getBalance({ address: short.address })).toBe(0n);
    for (const account of honest) {
      expect(await chain().getBalance({ address: account.address })).toBe(
        (1_000_000n - AMOUNT) * WEI_PER_UNIT,
      );
    }
  }, 180_000);
});

describe("a payer's balance is held across origins sharing the database", () => {
  it("16 authorizations against a balance covering 2, half to each of two origins at once: 2 settle, 14 refused, none reverted", async () => {
    const second = await stack.startOrigin();
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    const short = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
    const window = { validAfter: 0n, validBefore: BigInt(Math.floor(Date.now() / 1000)) + 60n };
    const payloads = await Promise.all(
      Array.from({ length: 16 }, () => envelopeWithWindow(quoted, short, window)),
    );
    const answers = await Promise.all(
      payloads.map(async (payload, i) => {
        const base = i % 2 === 0 ? stack.origin.base : second.base;
        const response = await fetch(`${base}/x402/facilitator/settle`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            x402Version: 2,
            paymentPayload: payload,
            paymentRequirements: payload.accepted,
          }),
        });
        return (await response.json()) as Settled;
      }),
    );
    expect(tally(answers.map((answer) => (answer.success ? "settled" : answer.errorReason!)))).toEqual({
      settled: 2,
      [X402_REASONS.insufficientBalance]: 14,
    });
    const rows = await queryRows<{ status: string }>(
      stack.db.handle.db,
      sql`select status from x402_settlements where payer = ${short.address.toLowerCase()}`,
    );
    expect(tally(rows.map((row) => row.status))).toEqual({ settled: 2 });
  });
});

describe("the per-client window of refused verify, settle and paid demo requests", () => {
  const LIMIT = 3;
  let limitedEdge: EdgeHandle;

  beforeAll(async () => {
    const limited = await stack.startOrigin({ AGENT_X402_RATE_LIMIT_PER_MINUTE: String(LIMIT) });
    limitedEdge = await startTestEdge({
      originUrl: limited.url,
      edgeSharedSecret: EDGE_SECRET,
      onLine: () => {},
      directSocket: true,
    });
  }, 120_000);
  afterAll(async () => {
    await limitedEdge?.stop();
  });

  /** A request at the edge worker from `ip`, as Cloudflare's network hands it over. */
  const from = async (
    ip: string,
    route: "verify" | "settle" | "paid demo" | "unpaid demo",
  ): Promise<{ status: number; retryAfter: string | null; body: Record<string, unknown> }> => {
    const base = `${limitedEdge.directUrl!.origin}/77/x402`;
    const headers: Record<string, string> = { "cf-connecting-ip": ip, "content-type": "application/json" };
    const response =
      route === "paid demo" || route === "unpaid demo"
        ? await fetch(`${base}/demo`, {
            headers:
              route === "paid demo" ? { ...headers, "PAYMENT-SIGNATURE": "bm90IGEgcGF5bWVudA==" } : headers,
          })
        : await fetch(`${base}/facilitator/${route}`, { method: "POST", headers, body: "{}" });
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      body: (await response.json()) as Record<string, unknown>,
    };
  };

  it("counts a client's refused verify, settle and paid requests together; past the limit each is 429 in its own x402 shape with Retry-After", async () => {
    // Mutation: X402Limits.refused never refusing answers the fourth junk verify 200.
    const ip = "198.51.100.7";
    expect((await from(ip, "verify")).status).toBe(200);
    expect((await from(ip, "settle")).status).toBe(400);
    expect((await from(ip, "paid demo")).status).toBe(402);
    // An unpaid quote costs nothing and is never held back.
    expect((await from(ip, "unpaid demo")).status).toBe(402);

    const verify = await from(ip, "verify");
    expect(verify).toMatchObject({
      status: 429,
      body: { isValid: false, invalidReason: X402_REASONS.rateLimited },
    });
    const settle = await from(ip, "settle");
    expect(settle).toMatchObject({
      status: 429,
      body: { success: false, errorReason: X402_REASONS.rateLimited, transaction: "" },
    });
    const paid = await from(ip, "paid demo");
    expect(paid).toMatchObject({ status: 429, body: { x402Version: 2, error: X402_REASONS.rateLimited } });
    expect((paid.body.accepts as unknown[]).length).toBe(1);
    for (const answer of [verify, settle, paid]) {
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
      expect(Number(answer.retryAfter)).toBeLessThanOrEqual(60);
    }
    // Another client is not held back by this one.
    expect((await from("198.51.100.8", "verify")).status).toBe(200);
  });

  it("counts IPv6 clients by /64: another address of the same /64 is the same client", async () => {
    for (let i = 1; i <= LIMIT; i++) expect((await from(`2001:db8:5:6::${i}`, "verify")).status).toBe(200);
    expect((await from("2001:db8:5:6:ffff::9", "settle")).status).toBe(429);
    expect((await from("2001:db8:5:7::1", "settle")).status).toBe(400);
  });
});

describe("the quote names the URL the client requested, never the origin's", () => {
  const resourceUrl = async (url: string, headers: Record<string, string> = {}): Promise<string> => {
    const response = await fetch(url, { headers });
    expect(response.status).toBe(402);
    const body = (await response.json()) as { resource: { url: string } };
    const header = JSON.parse(Buffer.from(response.headers.get("payment-required")!, "base64").toString());
    expect(header.resource.url).toBe(body.resource.url);
    return body.resource.url;
  };

  it("through the edge, resource.url is exactly the edge URL, whatever X-svc-Request-URL the client sends", async () => {
    const url = `${edge.url}/77/x402/demo`;
    expect(await resourceUrl(url)).toBe(url);
    expect(await resourceUrl(url, { [HEADER_REQUEST_URL]: "https://attacker.example/77/x402/demo" })).toBe(
      url,
    );
    expect(await resourceUrl(`${url}?ref=1`)).toBe(`${url}?ref=1`);
    // On the worker's own socket (where bench:x402 and the soak come in), its own URL.
    const direct = `${edge.directUrl!.origin}/77/x402/demo`;
    expect(await resourceUrl(direct, { "cf-connecting-ip": "203.0.113.9" })).toBe(direct);
    expect(new URL(stack.origin.url).port).not.toBe(new URL(url).port);
  });

  it("straight at the origin, a client's X-svc-Request-URL counts for nothing without the edge secret", async () => {
    const own = `${stack.origin.base}/x402/demo`;
    const forged = { [HEADER_REQUEST_URL]: "https://attacker.example/77/x402/demo" };
    expect(await resourceUrl(own, forged)).toBe(own);
    expect(
      await resourceUrl(own, { ...forged, [HEADER_EDGE_SECRET]: "not-the-edge-secret-0123456789abcdef" }),
    ).toBe(own);
  });

  it("AGENT_PUBLIC_BASE_URL names the resource, through the edge or not", async () => {
    const configured = await stack.startOrigin({ AGENT_PUBLIC_BASE_URL: "https://wallet.example.com/77/" });
    const configuredEdge = await startTestEdge({
      originUrl: configured.url,
      edgeSharedSecret: EDGE_SECRET,
      onLine: () => {},
    });
    try {
      expect(await resourceUrl(`${configured.base}/x402/demo?ref=1`)).toBe(
        "https://wallet.example.com/77/x402/demo?ref=1",
      );
      expect(await resourceUrl(`${configuredEdge.url}/77/x402/demo`)).toBe(
        "https://wallet.example.com/77/x402/demo",
      );
    } finally {
      await configuredEdge.stop();
    }
  });
});
