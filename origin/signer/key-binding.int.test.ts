import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// Key binding applies on every signing path (docs/enclave.md#the-enclaves-signing-policy). The
// review pointed an identity's key ref at a free pool key and got an x402 authorization signed by
// that unassigned key. The enclave now signs only when the key's address is the `from` the gateway
// names (the identity's assigned wallet), and the gateway answers its refusal as 403
// agent_key_binding_mismatch: nothing signed.

const PAY_TO = newAccount().address.toLowerCase() as Address;

describe("an identity whose key ref points at another key (real stack)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: 10_000n, payTo: PAY_TO } }, { timeoutMs: 180_000 });
  let agent: StackAgent;
  /** The free pool key the identity row is pointed at, as an attacker on the database would. */
  let poolKey: { key_ref: string; address: string };

  const count = async (query: ReturnType<typeof sql>): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(stack.db.handle.db, query);
    return row!.n;
  };

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 20_000_000n });
    await stack.addFreeKeys(1);
    const [free] = await queryRows<{ key_ref: string; address: string; batch_id: string }>(
      stack.db.handle.db,
      sql`select key_ref, address, batch_id from key_pool where status = 'free' order by created_at desc limit 1`,
    );
    poolKey = free!;
    // Drilled like the agent's own batch, so the funding gate has nothing to say about it.
    const drilled = await stack.drill(free!.batch_id);
    if (!drilled.ok) throw new Error(`drill: ${drilled.error}`);
    await stack.db.handle.db.execute(
      sql`update agent_identities set agent_transfer_key_ref = ${poolKey!.key_ref}
          where agent_id = ${agent.agentId}`,
    );
  }, 180_000);

  it("gets 403 agent_key_binding_mismatch from POST /transfers: no signed action, no transaction", async () => {
    const calls = agentCalls(stack.origin.base, agent.token);
    const response = await calls.transfer({
      idempotency_key: newKey(),
      to: newAccount().address,
      amount: "1000000",
    });
    expect(response.status).toBe(403);
    expect((response.body as { error: Record<string, unknown> }).error).toMatchObject({
      code: "agent_key_binding_mismatch",
      message: expect.stringContaining("nothing was signed"),
    });
    // The action is stored as failed with the code the agent was given, and nothing signed is kept.
    const actions = await queryRows<{ status: string; error_code: string | null; tx_hash: string | null }>(
      stack.db.handle.db,
      sql`select status, error_code, tx_hash from agent_actions where agent_id = ${agent.agentId}`,
    );
    expect(actions).toEqual([{ status: "failed", error_code: "agent_key_binding_mismatch", tx_hash: null }]);
    expect(
      await count(
        sql`select count(*)::int as n from outgoing_transactions
            where sender in (${agent.wallet.toLowerCase()}, ${poolKey.address.toLowerCase()})`,
      ),
    ).toBe(0);
    const chain = publicClientFor(stack.devnet.url);
    expect(await chain.getTransactionCount({ address: poolKey.address as Address })).toBe(0);
    expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(0);
  });

  it("gets 403 agent_key_binding_mismatch from POST /x402/authorize: nothing signed", async () => {
    const quote = await fetch(`${stack.origin.base}/x402/demo`);
    expect(quote.status).toBe(402);
    const response = await fetch(`${stack.origin.base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        payment_required: await quote.json(),
        nonce: `0x${randomBytes(32).toString("hex")}`,
      }),
    });
    const body = (await response.json()) as { error?: Record<string, unknown> };
    expect({ status: response.status, code: body.error?.code }).toEqual({
      status: 403,
      code: "agent_key_binding_mismatch",
    });
    expect(
      await count(
        sql`select count(*)::int as n from agent_actions
            where agent_id = ${agent.agentId} and kind = 'x402'
              and (status = 'signed' or signed_payload is not null)`,
      ),
    ).toBe(0);
  });
});
