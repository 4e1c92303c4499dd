import { describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { checkingFetch } from "../testing/openapi-check.ts";
import { useMoneyStack } from "../testing/stack.ts";
import {
  createGatewayClient,
  type GatewayClient,
  isHeld,
  PolicyDenied,
  PolicyLooseningRequiresOperator,
} from "./index.ts";

// The client's spending-policy calls (docs/agents.md#your-spending-policy) against the real stack:
// origin, enclave, devnet, Postgres. Every answer is checked against the OpenAPI document.

describe("gateway client: the agent's spending policy (real stack)", () => {
  const stack = useMoneyStack();
  const fetch = checkingFetch();
  const clientFor = (token: string): GatewayClient =>
    createGatewayClient({ baseUrl: stack.origin.base, token, fetch });

  it("reads, tightens and checks the policy; a loosening is PolicyLooseningRequiresOperator and changes nothing", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const client = clientFor(agent.token);
    expect(await client.policy()).toEqual({ policy: null, version: null, node_frozen: false, budgets: [] });

    const set = await client.updatePolicy({
      transfers: { per_tx_units: "5000000", daily_count: 3 },
      approval_above_units: "2000000",
    });
    expect(set).toMatchObject({
      policy: { transfers: { per_tx_units: "5000000", daily_count: 3 }, approval_above_units: "2000000" },
      version: 1,
    });
    expect((await client.network()).agent.spending_policy).toBe(true);
    expect(await client.policy()).toEqual(set);
    expect(set.budgets.find((budget) => budget.rule === "transfers.daily_count")).toMatchObject({
      limit: "3",
      used: "0",
      remaining: "3",
    });

    const loosening = await rejection(client.updatePolicy({ approval_above_units: null }));
    expect(loosening).toBeInstanceOf(PolicyLooseningRequiresOperator);
    expect(loosening).toMatchObject({ status: 403, exitCode: 24 });
    expect((await client.policy()).version).toBe(1);

    const to = newAccount().address;
    expect(await client.checkPolicy({ transfer: { to, amount: 1_000_000n } })).toEqual({
      decision: "allow",
      rule: null,
      remaining: null,
    });
    expect(await client.checkPolicy({ transfer: { to, amount: "3000000" } })).toEqual({
      decision: "hold",
      rule: "approval_above_units",
      remaining: null,
    });
    expect(await client.checkPolicy({ transfer: { to, amount: 6_000_000n } })).toEqual({
      decision: "deny",
      rule: "transfers.per_tx_units",
      remaining: "5000000",
    });
    // The check reserved nothing.
    expect(await client.policy()).toEqual(set);
  });

  it("a transfer above approval_above_units resolves held (typed), its repeat answers it; one over a budget throws PolicyDenied with rule and remaining", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const client = clientFor(agent.token);
    await client.updatePolicy({ transfers: { daily_units: "4000000" }, approval_above_units: "2000000" });
    const to = newAccount().address;

    const held = await client.transfer({ to, amount: 3_000_000n, idempotencyKey: "held-1" });
    if (!isHeld(held)) throw new Error(`expected held, got ${held.status}`);
    expect(held).toMatchObject({
      status: "held",
      rule: "approval_above_units",
      tx_hash: null,
      idempotency_key: "held-1",
    });
    expect(Date.parse(held.expires_at)).toBeGreaterThan(Date.now());
    const again = await client.transfer({ to, amount: 3_000_000n, idempotencyKey: "held-1" });
    expect(again).toMatchObject({ action_id: held.action_id, status: "held" });
    expect((await client.action(held.action_id)).status).toBe("held");

    // 1.5 USDC plus its fee is within the day's 4; another 2.5 is not.
    const sent = await client.transfer({ to, amount: 1_500_000n });
    expect(isHeld(sent)).toBe(false);
    expect((await client.waitForAction(sent.action_id)).status).toBe("confirmed");
    const over = await rejection(
      client.transfer({ to, amount: 2_500_000n, idempotencyKey: "over-budget-1" }),
    );
    expect(over).toBeInstanceOf(PolicyDenied);
    const denied = over as PolicyDenied;
    expect(denied).toMatchObject({ status: 403, code: "policy_denied", exitCode: 23 });
    expect(denied.rule).toBe("transfers.daily_units");
    const { budgets } = await client.policy();
    expect(denied.remaining).toBe(
      budgets.find((budget) => budget.rule === "transfers.daily_units")!.remaining,
    );
    expect(BigInt(denied.remaining!)).toBeLessThan(2_500_000n);
    // Final for its key: the repeat is the same refusal, of the same class (the first answer's
    // extra fields, rule and remaining among them, are not repeated: docs/agents.md#moving-money).
    const repeat = await rejection(
      client.transfer({ to, amount: 2_500_000n, idempotencyKey: "over-budget-1" }),
    );
    expect(repeat).toBeInstanceOf(PolicyDenied);
    expect(repeat.body.action_id).toBe(denied.body.action_id);
  });
});
