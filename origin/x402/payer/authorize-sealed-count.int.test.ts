import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import type { StackAgent } from "../../../testing/money-stack.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { queryRows } from "../../db/client.ts";

// The enclave counts each key's x402 authorizations per UTC day against its sealed
// x402_daily_limit; the gateway answers the enclave's refusal as 429 x402_daily_limit with
// Retry-After (the next UTC day), and nothing is signed.

const PAY_TO = newAccount().address.toLowerCase() as Address;

describe("POST /x402/authorize past the enclave's sealed daily count (real stack)", () => {
  // A sealed count of 2; the node is configured alike (AGENT_X402_DAILY_LIMIT), as it must be.
  const stack = useMoneyStack(
    { x402: { amountUnits: 10_000n, payTo: PAY_TO }, policy: { x402DailyLimit: 2 } },
    { timeoutMs: 180_000 },
  );
  let agent: StackAgent;

  beforeAll(async () => {
    agent = await stack.newAgent();
  }, 180_000);

  const authorize = async (): Promise<{ status: number; retryAfter: string | null; body: unknown }> => {
    const quote = await fetch(`${stack.origin.base}/x402/demo`);
    const response = await fetch(`${stack.origin.base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        payment_required: await quote.json(),
        nonce: `0x${randomBytes(32).toString("hex")}`,
      }),
    });
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      body: await response.json(),
    };
  };

  it("signs two, then answers 429 x402_daily_limit with Retry-After until the next UTC day, signing nothing", async () => {
    expect((await authorize()).status).toBe(200);
    expect((await authorize()).status).toBe(200);
    const third = await authorize();
    expect(third.status).toBe(429);
    const error = (third.body as { error: Record<string, unknown> }).error;
    expect(error).toMatchObject({ code: "x402_daily_limit", retry_after: Number(third.retryAfter) });
    expect(Number(third.retryAfter)).toBeGreaterThan(0);
    expect(Number(third.retryAfter)).toBeLessThanOrEqual(86_400);
    const [signed] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions
          where agent_id = ${agent.agentId} and kind = 'x402' and signed_payload is not null`,
    );
    expect(signed!.n).toBe(2);
  });
});
