import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, rpc } from "../../../devnet/testing.ts";
import { sleep } from "../../../shared/sleep.ts";
import { spawnOrigin } from "../../../testing/origin-process.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { expectRetryPaidOnce } from "../../../testing/x402-paid-once.ts";
import {
  envelope,
  fundedPayer,
  identifiedEnvelope,
  pay,
  paymentHeader,
} from "../../../testing/x402-payer.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// An origin stopped (SIGTERM, as a restart does) while a paid request waits for its settlement's
// receipt, longer than the server's 10 s drain (AGENT_X402_RECEIPT_TIMEOUT_MS up to 80 s): the real
// origin process, enclave, devnet (its mining held) and Postgres.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("an origin stopped while a paid x402 request waits for its receipt (real processes)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });

  it("answers it, and the same payment presented again meanwhile (with a payment id and without), settlement_pending naming the transaction at once, exits 0, and the retry is paid, once", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    // A second payer pays under a payment id. The first payer's second presentation waits on its
    // payment's settlement (settle.ts); the second payer's, signed anew, on its id's.
    const identified = await fundedPayer(stack.devnet.url);
    const origin = await spawnOrigin({ env: stack.processEnv({ AGENT_X402_RECEIPT_TIMEOUT_MS: "60000" }) });
    const demo = `${origin.base}/x402/demo`;
    const signature = paymentHeader(await envelope(demo, payer));
    const paymentId = `shutdown-${Date.now()}`;
    const idSignature = paymentHeader(await identifiedEnvelope(demo, identified, paymentId));
    // The same purchase signed again under its id (a client that lost its first envelope): the id
    // binds it to the first's settlement, which it waits on (settle-once-per-id.ts).
    const resigned = paymentHeader(await identifiedEnvelope(demo, identified, paymentId));
    const storedOf = async (address: Address) =>
      (
        await queryRows<{ tx_hash: string | null }>(
          stack.db.handle.db,
          sql`select tx_hash from x402_settlements where payer = ${address.toLowerCase()}`,
        )
      )[0]?.tx_hash ?? undefined;
    const stored = () => storedOf(payer.address);

    expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    let transaction: string;
    let idTransaction: string;
    try {
      const presented = (header: string) =>
        pay(demo, header).then(
          (answer) => ({ answer, at: Date.now() }),
          (error: unknown) => ({ error, at: Date.now() }),
        );
      const paying = [presented(signature), presented(idSignature)];
      // Signed, stored and broadcast: each request waits for a receipt the held chain does not give.
      await expect.poll(stored, { timeout: 30_000, interval: 50 }).toMatch(/^0x[0-9a-f]{64}$/);
      await expect
        .poll(() => storedOf(identified.address), { timeout: 30_000, interval: 50 })
        .toMatch(/^0x[0-9a-f]{64}$/);
      transaction = (await stored())!;
      idTransaction = (await storedOf(identified.address))!;
      // The same payments presented again meanwhile wait on those settlements.
      const again = [presented(signature), presented(resigned)];
      await sleep(500);
      const stoppedAt = Date.now();
      const exited = origin.stop();
      for (const [pending, named] of [
        [[paying[0]!, again[0]!], transaction],
        [[paying[1]!, again[1]!], idTransaction],
      ] as const) {
        for (const paid of await Promise.all(pending)) {
          expect("answer" in paid ? paid.answer.status : paid.error).toBe(402);
          if (!("answer" in paid)) return;
          expect(paid.answer.response).toMatchObject({
            success: false,
            errorReason: X402_REASONS.settlementPending,
            transaction: named,
          });
          expect(paid.at - stoppedAt).toBeLessThan(3_000);
        }
      }
      expect(await exited).toBe(0);
    } finally {
      await origin.stop();
      await rpc(stack.devnet.url, "dev_setAutomine", [true]);
      await rpc(stack.devnet.url, "dev_mine", []);
    }

    // The next origin follows the settlement to its end; the retry the pending answer asked for is paid.
    const next = await stack.startOrigin({}, { periodMs: 100 });
    try {
      await expect
        .poll(
          async () =>
            (
              await queryRows<{ status: string }>(
                stack.db.handle.db,
                sql`select status from x402_settlements where payer = ${payer.address.toLowerCase()}`,
              )
            )[0]?.status,
          { timeout: 30_000, interval: 100 },
        )
        .toBe("settled");
      await expectRetryPaidOnce(`${next.base}/x402/demo`, signature, {
        devnetUrl: stack.devnet.url,
        payer: payer.address,
        transaction,
      });
      // A payment id names the request, its URL included: its retry goes where it was first
      // presented, as a client's does, to an origin serving there again. Under its id every repeat
      // is answered so; the chain moved the money once.
      const again = await spawnOrigin({ env: stack.processEnv(), port: Number(new URL(origin.base).port) });
      try {
        for (let repeat = 0; repeat < 2; repeat++) {
          const retry = await pay(demo, idSignature);
          expect(retry.status, JSON.stringify(retry.body)).toBe(200);
          expect(retry.response).toMatchObject({ success: true, transaction: idTransaction });
        }
        expect(await authorizationUsedCount(stack.devnet.url, identified.address)).toBe(1);
      } finally {
        await again.stop();
      }
    } finally {
      await next.close();
    }
  }, 120_000);
});
