import type { PaymentPayload } from "@x402/core/types";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import { envelopeWithWindow, fundedPayer, quote } from "../../../testing/x402-payer.ts";
import type { SignerClient } from "../../signer/types.ts";
import { X402_REASONS } from "../reasons.ts";

// An authorization presented to the facilitator with exactly the validity margin (6 s) left by the
// origin's clock, every part real (devnet, enclave, Postgres, the origin). The enclave reads its own
// clock a moment after the origin's checks, and the second can turn in between; the hop to the
// enclave is held here until it has, so that moment always falls in the next second.

const AMOUNT = 10_000n;
const MARGIN_SECONDS = 6n;
const payTo = newAccount().address.toLowerCase() as Address;
const sleepUntil = (atMs: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, atMs - Date.now())));

describe("the facilitator at the validity margin's last second (real stack)", { timeout: 120_000 }, () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 180_000 });
  /** sign_settlement requests that reached the enclave. */
  let settlementsAsked = 0;
  const origin = useStackOrigin(
    "origin",
    stack,
    (): { signer: SignerClient } => ({
      signer: {
        ...stack.signer,
        signSettlement: async (params) => {
          settlementsAsked++;
          await sleepUntil((Math.floor(Date.now() / 1000) + 1) * 1000 + 5);
          return stack.signer.signSettlement(params);
        },
      },
    }),
    { timeoutMs: 180_000 },
  );
  const facilitator = async (route: "verify" | "settle", payload: PaymentPayload) => {
    const response = await fetch(`${origin.base}/x402/facilitator/${route}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        x402Version: 2,
        paymentPayload: payload,
        paymentRequirements: payload.accepted,
      }),
    });
    return (await response.json()) as Record<string, unknown>;
  };

  it("verify and settle refuse an authorization with no more than the margin left as valid_before, nothing signed, where verify called it valid and settle answered unexpected_settle_error when the enclave's clock had turned the second", async () => {
    const quoted = await quote(`${origin.base}/x402/demo`);
    const payer = await fundedPayer(stack.devnet.url);
    const second = BigInt(Math.floor(Date.now() / 1000)) + 2n;
    const payload = await envelopeWithWindow(quoted, payer, {
      validAfter: 0n,
      validBefore: second + MARGIN_SECONDS,
    });
    const balance = await publicClientFor(stack.devnet.url).getBalance({ address: payer.address });
    await sleepUntil(Number(second) * 1000 + 100);
    const [verified, settled] = [await facilitator("verify", payload), await facilitator("settle", payload)];
    expect({ verified, settled }).toMatchObject({
      verified: { isValid: false, invalidReason: X402_REASONS.validBefore },
      settled: { success: false, errorReason: X402_REASONS.validBefore },
    });
    expect(settlementsAsked).toBe(0);
    expect(await publicClientFor(stack.devnet.url).getBalance({ address: payer.address })).toBe(balance);
  });
});
