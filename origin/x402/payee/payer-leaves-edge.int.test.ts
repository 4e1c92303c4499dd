import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, rpc } from "../../../devnet/testing.ts";
import { sleep } from "../../../shared/sleep.ts";
import { startTestEdge } from "../../../testing/edge.ts";
import type { TestOrigin } from "../../../testing/origin.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../../testing/x402-payer.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// A payer of the demo that leaves before its paid answer, through the edge (the worker in
// Miniflare behind its local front, dev/edge.ts), every part real: the edge's request to the origin
// must end with its client's, so that the origin sees the caller gone and keeps the paid answer
// owed to the payer's retry, as x402-faults.int.test.ts shows straight at the origin.
const EDGE_SECRET = "payer-leaves-edge-secret-0123456789abcdef0123456789";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("a payer through the edge that leaves before its paid answer", () => {
  // The stack's own origin shares the database; its tracker is slowed right down so that the
  // origin each test starts is the one that finishes the settlement (as in x402-faults).
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      tracker: { periodMs: 3_600_000 },
    },
    { timeoutMs: 120_000 },
  );

  const settlementOf = (payer: Address) =>
    queryRows<{ status: string; tx_hash: string | null }>(
      stack.db.handle.db,
      sql`select status, tx_hash from x402_settlements where payer = ${payer.toLowerCase()}`,
    );

  /** An origin with `env` and an edge in front of it; both stopped after `run`. */
  const throughEdge = async (
    env: Record<string, string>,
    run: (demo: string, origin: TestOrigin) => Promise<void>,
  ): Promise<void> => {
    const origin = await stack.startOrigin(env, { periodMs: 100 });
    try {
      const edge = await startTestEdge({
        originUrl: origin.url,
        edgeSharedSecret: EDGE_SECRET,
        onLine: () => {},
      });
      try {
        await run(`${edge.url}/77/x402/demo`, origin);
      } finally {
        await edge.stop();
      }
    } finally {
      await origin.close();
    }
  };

  it("leaving while its settlement is mined takes no paid answer: the retry through the edge is paid, once, and the next told the nonce is used", async () => {
    // Before the fix the edge's request to the origin went on after the payer's fetch was aborted
    // (the local front's cut reached workerd as a FIN, which it does not notice for a request whose
    // body it has whole), so the origin answered paid to nobody and the retry was told
    // invalid_exact_evm_nonce_already_used: paid, and nothing delivered.
    await throughEdge({ AGENT_X402_RECEIPT_TIMEOUT_MS: "30000" }, async (demo) => {
      const payer = await fundedPayer(stack.devnet.url);
      const signature = paymentHeader(await envelope(demo, payer));
      expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
      let transaction: string;
      try {
        const leaving = new AbortController();
        const first = fetch(demo, { headers: { "PAYMENT-SIGNATURE": signature }, signal: leaving.signal });
        const stored = async () => (await settlementOf(payer.address))[0]?.tx_hash ?? undefined;
        await expect.poll(stored, { timeout: 30_000, interval: 50 }).toMatch(/^0x[0-9a-f]{64}$/);
        transaction = (await stored())!;
        leaving.abort();
        await expect(first).rejects.toThrow();
        // The cut crosses the front, the worker and the origin before the settlement is mined.
        await sleep(500);
      } finally {
        await rpc(stack.devnet.url, "dev_setAutomine", [true]);
        await rpc(stack.devnet.url, "dev_mine", []);
      }
      await expect
        .poll(() => settlementOf(payer.address), { timeout: 30_000, interval: 100 })
        .toEqual([{ status: "settled", tx_hash: transaction }]);
      // Past the left settle's receipt poll, had it taken the answer.
      await sleep(500);

      const retry = await pay(demo, signature);
      expect(retry.status, JSON.stringify(retry.body)).toBe(200);
      expect(retry.response).toMatchObject({ success: true, transaction });
      const later = await pay(demo, signature);
      expect(later.status, JSON.stringify(later.body)).toBe(402);
      expect(later.response).toMatchObject({
        success: false,
        errorReason: X402_REASONS.nonceUsed,
        transaction,
      });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    });
  }, 120_000);

  it("a retry of a pending payment that leaves while it waits for the settlement takes no paid answer: the next retry through the edge is paid, once", async () => {
    await throughEdge({ AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" }, async (demo) => {
      const payer = await fundedPayer(stack.devnet.url);
      const signature = paymentHeader(await envelope(demo, payer));
      expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
      let transaction: string;
      try {
        const pending = await pay(demo, signature);
        expect(pending.response).toMatchObject({ errorReason: X402_REASONS.settlementPending });
        transaction = pending.response!.transaction as string;
        const leaving = new AbortController();
        const waiting = fetch(demo, { headers: { "PAYMENT-SIGNATURE": signature }, signal: leaving.signal });
        // The retry waits for the settlement (earlier-presentation.ts) until its caller leaves.
        await sleep(500);
        leaving.abort();
        await expect(waiting).rejects.toThrow();
        await sleep(500);
      } finally {
        await rpc(stack.devnet.url, "dev_setAutomine", [true]);
        await rpc(stack.devnet.url, "dev_mine", []);
      }
      await expect
        .poll(() => settlementOf(payer.address), { timeout: 30_000, interval: 100 })
        .toEqual([{ status: "settled", tx_hash: transaction }]);
      // Past the left retry's poll of the settlement (50 ms), had it taken the answer.
      await sleep(500);

      const retry = await pay(demo, signature);
      expect(retry.status, JSON.stringify(retry.body)).toBe(200);
      expect(retry.response).toMatchObject({ success: true, transaction });
      const later = await pay(demo, signature);
      expect(later.status, JSON.stringify(later.body)).toBe(402);
      expect(later.response).toMatchObject({
        success: false,
        errorReason: X402_REASONS.nonceUsed,
        transaction,
      });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    });
  }, 120_000);
});
