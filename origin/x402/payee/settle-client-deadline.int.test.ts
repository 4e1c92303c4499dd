import { HTTPFacilitatorClient } from "@x402/core/server";
import type { Address } from "viem";
import { expect, it } from "vitest";
import { newAccount, rpc } from "../../../devnet/testing.ts";
import { sleep } from "../../../shared/sleep.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelope, fundedPayer } from "../../../testing/x402-payer.ts";
import { X402_CLIENT_TIMEOUT_MS, X402_RECEIPT_TIMEOUT_MAX_MS } from "../../config.ts";
import { X402_REASONS } from "../reasons.ts";

// docs/x402.md#what-settle-answers: whatever receipt wait start-up accepts, a settle answers
// before `@x402/core`'s HTTPFacilitatorClient gives up on it (its own 90 s), so a seller on the
// official packages learns `settlement_pending` and the transaction, never a bare timeout. Every
// part real: the devnet holds its blocks back, the client is the official one, unchanged.
const stack = useMoneyStack(
  {
    x402: { amountUnits: 10_000n, payTo: newAccount().address.toLowerCase() as Address },
    env: { AGENT_X402_RECEIPT_TIMEOUT_MS: String(X402_RECEIPT_TIMEOUT_MAX_MS) },
  },
  { timeoutMs: 180_000 },
);

it("with the longest receipt wait start-up accepts, a settle whose receipt is late, and another presentation of the same payment meanwhile, are both answered settlement_pending before the official client gives up", async () => {
  const payer = await fundedPayer(stack.devnet.url);
  const payload = await envelope(`${stack.origin.base}/x402/demo`, payer);
  const client = new HTTPFacilitatorClient({ url: `${stack.origin.base}/x402/facilitator` });
  const settle = () =>
    client.settle(payload, payload.accepted).then(
      (answer) => `answered ${answer.success}`,
      (error: { name?: string; errorReason?: string }) => error.errorReason ?? error.name,
    );
  expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
  try {
    const started = Date.now();
    const first = settle();
    // The second waits on the first, which holds the payment by then.
    await sleep(1_000);
    const answers = await Promise.all([first, settle()]);
    expect(answers).toEqual([X402_REASONS.settlementPending, X402_REASONS.settlementPending]);
    expect(Date.now() - started).toBeLessThan(X402_CLIENT_TIMEOUT_MS + 1_000);
  } finally {
    await rpc(stack.devnet.url, "dev_setAutomine", [true]);
    await rpc(stack.devnet.url, "dev_mine", []);
  }
}, 180_000);
