import type { PaymentPayload } from "@x402/core/types";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelopeWithWindow, fundedPayer, quote } from "../../../testing/x402-payer.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// The facilitator's bound on an authorization's validity against the enclave's, every part real
// (devnet, enclave, Postgres, the origin): a node whose sealed longest validity
// (AGENT_X402_MAX_TIMEOUT_SECONDS, 75 here) is under the demo quote's 60 s plus the 30 s allowed
// for a payer's clock ahead of ours. The enclave signs no settlement valid longer than its sealed
// bound, so verify must not call such a payment valid, nor settle take it.
const AMOUNT = 10_000n;
const MAX_VALIDITY_SECONDS = 75;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    policy: { x402MaxTimeoutSeconds: MAX_VALIDITY_SECONDS },
    env: { AGENT_X402_MAX_TIMEOUT_SECONDS: String(MAX_VALIDITY_SECONDS) },
  },
  { timeoutMs: 180_000 },
);

async function facilitator(path: "verify" | "settle", payload: PaymentPayload) {
  const response = await fetch(`${stack.origin.base}/x402/facilitator/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const settlements = async (): Promise<number> =>
  (
    await queryRows<{ n: number }>(stack.db.handle.db, sql`select count(*)::int as n from x402_settlements`)
  )[0]!.n;

describe("an authorization valid longer than the enclave settles (AGENT_X402_MAX_TIMEOUT_SECONDS below the demo's 60 s + 30 s)", () => {
  it("from a payer whose clock is 20 s ahead is refused validity_too_long by verify and by settle, nothing signed; one 10 s ahead settles", async () => {
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    expect(quoted.accepted.maxTimeoutSeconds).toBe(60);
    // The official client's window on a host 20 s ahead: validBefore its now + 60, our now + 80.
    // Our now read once the payer is funded: read before, it let a funding slower than the 5 s
    // between 80 and the bound of 75 bring validBefore within the bound by the time verify ran.
    const payer = await fundedPayer(stack.devnet.url);
    const now = BigInt(Math.floor(Date.now() / 1000));
    const ahead = await envelopeWithWindow(quoted, payer, {
      validAfter: 0n,
      validBefore: now + 80n,
    });
    const refused = { isValid: false, invalidReason: X402_REASONS.validityTooLong };
    // Mutation: bounding validBefore by the quote's 60 s + 30 s alone answers isValid: true here,
    // and the settle then fails unexpected_settle_error once the enclave refuses to sign it.
    expect((await facilitator("verify", ahead)).body).toMatchObject(refused);
    const before = await settlements();
    expect(await facilitator("settle", ahead)).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.validityTooLong, transaction: "" },
    });
    expect(await settlements()).toBe(before);

    // 10 s ahead: within both bounds, verified and settled.
    const near = await envelopeWithWindow(quoted, await fundedPayer(stack.devnet.url), {
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000)) + 70n,
    });
    expect((await facilitator("verify", near)).body).toMatchObject({ isValid: true });
    expect(await facilitator("settle", near)).toMatchObject({ status: 200, body: { success: true } });
  });
});
