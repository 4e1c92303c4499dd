import { decodePaymentResponseHeader, wrapFetchWithPayment } from "@x402/fetch";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { payWithToken } from "../../../dev/x402-token-payer.ts";
import { newAccount } from "../../../devnet/testing.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { chain77X402Client } from "../../../testing/x402-official-client.ts";
import { fundedPayer, quote } from "../../../testing/x402-payer.ts";

// A node whose sealed longest validity (AGENT_X402_MAX_TIMEOUT_SECONDS, 30 here) is under the
// demo's usual 60 s, every part real (devnet, enclave, Postgres, the origin). The official client
// signs validBefore = now + the quote's maxTimeoutSeconds, and the node's own agents sign for that
// long too, so the quote must not ask for more than the node will settle or authorize.
const AMOUNT = 10_000n;
const MAX_VALIDITY_SECONDS = 30;
const payTo = newAccount().address.toLowerCase() as Address;

describe("the demo on a node sealing a validity under 60 s", { timeout: 120_000 }, () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      policy: { x402MaxTimeoutSeconds: MAX_VALIDITY_SECONDS },
      env: { AGENT_X402_MAX_TIMEOUT_SECONDS: String(MAX_VALIDITY_SECONDS) },
    },
    { timeoutMs: 180_000 },
  );

  it("quotes the node's 30 s, and the official client and an agent of the node both pay it", async () => {
    // Mutation: a quote fixed at 60 s here is refused validity_too_long to the official client
    // and 422 to the agent (the node signs at most 30 s).
    expect((await quote(`${stack.origin.base}/x402/demo`)).accepted.maxTimeoutSeconds).toBe(
      MAX_VALIDITY_SECONDS,
    );

    const payer = await fundedPayer(stack.devnet.url);
    const paidFetch = wrapFetchWithPayment(fetch, chain77X402Client(payer));
    const response = await paidFetch(`${stack.origin.base}/x402/demo`);
    const header = response.headers.get("PAYMENT-RESPONSE");
    expect({
      status: response.status,
      settlement: header && decodePaymentResponseHeader(header),
    }).toMatchObject({
      status: 200,
      settlement: { success: true, payer: payer.address.toLowerCase() },
    });

    const agent = await stack.newAgent({ units: 1_000_000n });
    const paid = await payWithToken({ base: stack.origin.base, token: agent.token });
    expect({ status: paid.status, settlement: paid.settlement }).toMatchObject({
      status: 200,
      settlement: { success: true },
    });
  });
});
