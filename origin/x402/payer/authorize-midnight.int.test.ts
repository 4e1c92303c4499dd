import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import { movableClock } from "../../../testing/movable-clock.ts";
import { useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import { sellerQuote } from "../../../testing/x402-quote.ts";
import { startOfUtcDay, utcDate } from "../../agent-actions/utc-day.ts";
import type { Clock } from "../../clock.ts";
import { queryRows } from "../../db/client.ts";
import type { SignerClient } from "../../signer/types.ts";

// An authorization asked for in the last moment of a UTC day and signed in the first of the next:
// the origin read its clock before midnight, the enclave, a moment later, after it. The enclave's
// sealed count of the day is the hard bound; the gateway's count, its check and its 429 must tell
// the same day. No process's clock can be moved to midnight: the origin and the enclave (its own
// server, in this process) read one test clock, running with real time from where the test puts
// it; that clock is the one fake.

const AMOUNT = 10_000n;
const PAY_TO = newAccount().address.toLowerCase() as Hex;

const quote = (resourceUrl: string) => sellerQuote({ payTo: PAY_TO, amount: AMOUNT, url: resourceUrl });

const newNonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;

describe("x402 authorize across a UTC midnight (real stack; the origin's and the enclave's clock one test clock)", {
  timeout: 120_000,
}, () => {
  const clock = movableClock();
  // Two authorizations a UTC day, sealed and the origin's alike.
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo: PAY_TO },
      policy: { x402DailyLimit: 2 },
      enclaveNow: () => clock.now(),
    },
    { timeoutMs: 180_000 },
  );
  /** sign_x402_authorization requests that reached the enclave. */
  let signRequests = 0;
  /** Set: the hop to the enclave takes the clock past midnight (2.5 s on) before the enclave reads it. */
  let midnightOnTheWay = false;
  const origin = useStackOrigin(
    "origin",
    stack,
    (): { signer: SignerClient; clock: Clock } => ({
      signer: {
        ...stack.signer,
        signX402Authorization: (params) => {
          signRequests++;
          if (midnightOnTheWay) clock.advance(2_500);
          return stack.signer.signX402Authorization(params);
        },
      },
      clock,
    }),
    { timeoutMs: 180_000 },
  );

  const authorize = async (token: string, body: unknown) => {
    const response = await fetch(`${origin.base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      body: (await response.json()) as { error?: { code: string; message: string } },
    };
  };
  const check = async (token: string, paymentRequired: unknown) => {
    const response = await fetch(`${origin.base}/agent/v1/policy/check`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ x402: { payment_required: paymentRequired } }),
    });
    expect(response.status).toBe(200);
    return (await response.json()) as { decision: string; rule: string | null };
  };

  it("an authorization asked for before midnight and signed after it counts on the enclave's day at the gateway too: the next day's check and 429 are the gateway's, where its check allowed what the enclave then refused", async () => {
    const agent = await stack.newAgent();
    const resource = `http://127.0.0.1/77/x402/midnight/${randomBytes(4).toString("hex")}`;
    // Two seconds before a UTC midnight: the origin reads its clock well before it.
    const midnight = new Date(startOfUtcDay(clock.now()).getTime() + 86_400_000);
    clock.set(new Date(midnight.getTime() - 2_000));

    midnightOnTheWay = true;
    const boundary = await authorize(agent.token, {
      payment_required: quote(resource),
      nonce: newNonce(),
    }).finally(() => {
      midnightOnTheWay = false;
    });
    expect(boundary.status).toBe(200);
    expect(clock.now().getTime()).toBeGreaterThan(midnight.getTime());
    const second = await authorize(agent.token, { payment_required: quote(resource), nonce: newNonce() });
    expect(second.status).toBe(200);

    // Both were signed on the enclave's new day, its sealed count of it full: the gateway says so
    // itself, in its check and its refusal, without asking the enclave.
    expect(await check(agent.token, quote(resource))).toMatchObject({
      decision: "deny",
      rule: "node.x402_daily_limit",
    });
    const signedBefore = signRequests;
    const third = await authorize(agent.token, { payment_required: quote(resource), nonce: newNonce() });
    expect({ status: third.status, code: third.body.error?.code }).toEqual({
      status: 429,
      code: "x402_daily_limit",
    });
    expect(third.body.error?.message).toContain("AGENT_X402_DAILY_LIMIT");
    expect(signRequests).toBe(signedBefore);
    const counts = await queryRows<{ day: string; authorizations: number }>(
      stack.db.handle.db,
      sql`select day::text as day, authorizations from x402_daily_authorizations
          where agent_id = ${agent.agentId} and authorizations > 0 order by day`,
    );
    expect(counts).toEqual([{ day: utcDate(midnight), authorizations: 2 }]);
  });
});
