/**
 * What a payer sees when a payment's paid answer is still owed to it (docs/x402.md#after-settlement_pending-retry-the-same-payment):
 * its retry is paid, once, naming the settlement's transaction; the next presentation is told the
 * nonce is used, naming it too; and the chain used the authorization once.
 */
import type { Address } from "viem";
import { expect } from "vitest";
import { X402_REASONS } from "../origin/x402/reasons.ts";
import { pay } from "./x402-payer.ts";
import { authorizationUsedCount } from "./x402-settlements.ts";

export async function expectRetryPaidOnce(
  demoUrl: string,
  signature: string,
  settled: { devnetUrl: string; payer: Address; transaction: string },
): Promise<void> {
  const retry = await pay(demoUrl, signature);
  expect(retry.status, JSON.stringify(retry.body)).toBe(200);
  expect(retry.response).toMatchObject({ success: true, transaction: settled.transaction });
  const later = await pay(demoUrl, signature);
  expect(later.status, JSON.stringify(later.body)).toBe(402);
  expect(later.response).toMatchObject({
    success: false,
    errorReason: X402_REASONS.nonceUsed,
    transaction: settled.transaction,
  });
  expect(await authorizationUsedCount(settled.devnetUrl, settled.payer)).toBe(1);
}
