import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import type { StackAgent } from "../../../testing/money-stack.ts";
import { useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import { queryRows } from "../../db/client.ts";

// The enclave counts each key's x402 authorizations per UTC day against its sealed
// x402_daily_limit; the gateway answers the enclave's refusal as 429 x402_daily_limit with
// Retry-After (the next UTC day), and nothing is signed. A signing the enclave answered too late
// it may still have made and counted: the 503 says so.

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

  // An origin whose signer client waits 500 ms for the enclave's answer: a paused enclave times it out.
  const impatient = useStackOrigin("impatient origin", stack, () => ({
    signerTimings: { requestTimeoutMs: 500 },
  }));

  const authorize = async (
    options: { who?: StackAgent; base?: string; nonce?: string; quote?: unknown } = {},
  ): Promise<{ status: number; retryAfter: string | null; body: unknown }> => {
    const base = options.base ?? stack.origin.base;
    const quote = options.quote ?? (await (await fetch(`${base}/x402/demo`)).json());
    const response = await fetch(`${base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${(options.who ?? agent).token}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({
        payment_required: quote,
        nonce: options.nonce ?? `0x${randomBytes(32).toString("hex")}`,
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

  it("a signing the enclave answered too late is 503 saying it may have been signed and counted, not that nothing was: the enclave counted it, and the retry meets the sealed count", async () => {
    const late = await stack.newAgent();
    const nonce = `0x${randomBytes(32).toString("hex")}`;
    // The retry repeats the request exactly: the same quote and nonce.
    const quote = await (await fetch(`${impatient.base}/x402/demo`)).json();
    // The enclave paused (a real timeout): it reads the request once it runs again, and signs it.
    process.kill(stack.enclave.pid()!, "SIGSTOP");
    let timedOut: Awaited<ReturnType<typeof authorize>>;
    try {
      timedOut = await authorize({ who: late, base: impatient.base, nonce, quote });
    } finally {
      process.kill(stack.enclave.pid()!, "SIGCONT");
    }
    expect(timedOut.status).toBe(503);
    const error = (timedOut.body as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("agent_signer_unavailable");
    // What the agent is told must hold: the enclave did sign it, after the origin stopped waiting.
    expect(error.message).not.toMatch(/nothing was signed/);
    expect(error.message).toMatch(/may .*count against .*sealed daily/);
    // The sealed count of 2 took the late signature: one more authorization, and the retry of the
    // timed-out one (the same nonce) is the third.
    await expect
      .poll(async () => (await authorize({ who: late })).status, { timeout: 10_000, interval: 200 })
      .toBe(200);
    const retry = await authorize({ who: late, nonce, quote });
    expect(retry.status).toBe(429);
    expect((retry.body as { error: { code: string } }).error.code).toBe("x402_daily_limit");
  });
});
