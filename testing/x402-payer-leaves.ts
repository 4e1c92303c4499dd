/**
 * A demo payer that leaves before its paid answer (docs/x402.md#after-settlement_pending-retry-the-same-payment),
 * straight at an origin or through the edge: the answer nobody read is not taken, and the payer's
 * retry of the same payment is paid, once (testing/x402-paid-once.ts). The devnet's mining is held
 * while the payer leaves, so the settlement is still in flight when it does.
 */
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { expect } from "vitest";
import { rpc } from "../devnet/testing.ts";
import { type Db, queryRows } from "../origin/db/client.ts";
import { X402_REASONS } from "../origin/x402/reasons.ts";
import { sleep } from "../shared/sleep.ts";
import { expectRetryPaidOnce } from "./x402-paid-once.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "./x402-payer.ts";

/** Where the payer pays: the demo's URL (the origin's or the edge's), its devnet and database. */
export type LeavingPayerScene = { demo: string; devnetUrl: string; db: Db };

/** How long a cut takes to reach the origin (through the edge: the front, the worker, the origin). */
const CUT_REACHES_ORIGIN_MS = 500;

const settlementOf = (db: Db, payer: Address) =>
  queryRows<{ status: string; tx_hash: string | null }>(
    db,
    sql`select status, tx_hash from x402_settlements where payer = ${payer.toLowerCase()}`,
  );

/** Mining held while `leave` runs; then mined, and the payer's settlement awaited as settled. */
async function withMiningHeld(
  scene: LeavingPayerScene,
  payer: Address,
  leave: () => Promise<string>,
): Promise<string> {
  expect(await rpc(scene.devnetUrl, "dev_setAutomine", [false])).toMatchObject({ result: true });
  let transaction: string;
  try {
    transaction = await leave();
  } finally {
    await rpc(scene.devnetUrl, "dev_setAutomine", [true]);
    await rpc(scene.devnetUrl, "dev_mine", []);
  }
  await expect
    .poll(() => settlementOf(scene.db, payer), { timeout: 30_000, interval: 100 })
    .toEqual([{ status: "settled", tx_hash: transaction }]);
  return transaction;
}

/**
 * The payer aborts its paid request once its settlement's transaction is stored, while it is
 * mined; its retry is then paid, once. Returns the payer.
 */
export async function payerLeavesWhileMined(scene: LeavingPayerScene): Promise<Address> {
  const payer = await fundedPayer(scene.devnetUrl);
  const signature = paymentHeader(await envelope(scene.demo, payer));
  const transaction = await withMiningHeld(scene, payer.address, async () => {
    const leaving = new AbortController();
    const first = fetch(scene.demo, { headers: { "PAYMENT-SIGNATURE": signature }, signal: leaving.signal });
    const stored = async () => (await settlementOf(scene.db, payer.address))[0]?.tx_hash ?? undefined;
    await expect.poll(stored, { timeout: 30_000, interval: 50 }).toMatch(/^0x[0-9a-f]{64}$/);
    const stamped = (await stored())!;
    leaving.abort();
    await expect(first).rejects.toThrow();
    await sleep(CUT_REACHES_ORIGIN_MS);
    return stamped;
  });
  // Past the left settle's receipt poll, had it taken the answer.
  await sleep(500);
  await expectRetryPaidOnce(scene.demo, signature, {
    devnetUrl: scene.devnetUrl,
    payer: payer.address,
    transaction,
  });
  return payer.address;
}

/**
 * The payer's first presentation is answered settlement_pending (the origin's receipt wait short,
 * the mining held); its retry waits for that settlement and leaves meanwhile; the next retry is
 * paid, once.
 */
export async function retryLeavesWhilePending(scene: LeavingPayerScene): Promise<void> {
  const payer = await fundedPayer(scene.devnetUrl);
  const signature = paymentHeader(await envelope(scene.demo, payer));
  const transaction = await withMiningHeld(scene, payer.address, async () => {
    const pending = await pay(scene.demo, signature);
    expect(pending.response).toMatchObject({ errorReason: X402_REASONS.settlementPending });
    const leaving = new AbortController();
    const waiting = fetch(scene.demo, {
      headers: { "PAYMENT-SIGNATURE": signature },
      signal: leaving.signal,
    });
    // The retry waits for the settlement (earlier-presentation.ts) until its caller leaves.
    await sleep(500);
    leaving.abort();
    await expect(waiting).rejects.toThrow();
    await sleep(CUT_REACHES_ORIGIN_MS);
    return pending.response!.transaction as string;
  });
  // Past the left retry's poll of the settlement (50 ms), had it taken the answer.
  await sleep(500);
  await expectRetryPaidOnce(scene.demo, signature, {
    devnetUrl: scene.devnetUrl,
    payer: payer.address,
    transaction,
  });
}
