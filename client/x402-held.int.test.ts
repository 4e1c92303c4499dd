import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";
import { createGatewayClient, PolicyHeld } from "./index.ts";

// fetchWithPayment under a spending policy that holds the payment (docs/agents.md#holds), against
// the real stack with x402 on and the node's ceiling sealed as `npm start` seals it.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("x402 through the client: a payment the policy holds (real stack)", () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      policy: { x402MaxPerPaymentUnits: 1_000_000n, x402Payees: null },
    },
    { timeoutMs: 180_000 },
  );
  const fetch = checkingFetch();

  it("throws PolicyHeld with the action, rule, expiry and key; nothing is paid; the same key answers the held action again", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const client = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token, fetch });
    await client.updatePolicy({ approval_above_units: "5000" });
    const demo = `${stack.origin.base}/x402/demo`;
    const held = await rejection(client.fetchWithPayment(demo));
    expect(held).toBeInstanceOf(PolicyHeld);
    const hold = held as PolicyHeld;
    expect(hold).toMatchObject({ status: 202, code: "held", exitCode: 25 });
    expect(hold.rule).toBe("approval_above_units");
    expect(Date.parse(hold.expiresAt!)).toBeGreaterThan(Date.now());
    expect(hold.actionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(hold.idempotencyKey).toMatch(/^x402-/);
    expect((await client.action(hold.actionId!)).status).toBe("held");
    const again = await rejection(client.fetchWithPayment(demo, {}, { idempotencyKey: hold.idempotencyKey }));
    expect(again).toBeInstanceOf(PolicyHeld);
    expect((again as PolicyHeld).actionId).toBe(hold.actionId);
    expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(0);
  });
});
