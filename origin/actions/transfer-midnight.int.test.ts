import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import { movableClock } from "../../testing/movable-clock.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { startOfUtcDay, utcDate } from "../agent-actions/utc-day.ts";
import type { Clock } from "../clock.ts";
import { queryRows } from "../db/client.ts";
import type { SignerClient } from "../signer/types.ts";

// A transfer asked for in the last moment of a UTC day and signed in the first of the next: the
// origin's batch read its clock before midnight, the enclave, a moment later, after it. The
// enclave's sealed spend of the day is the hard bound; the gateway's count of the day, and so its
// refusal with what remains, must be of the same day. The origin and the enclave (its own server, in
// this process) read one test clock (testing/movable-clock.ts, the one fake).

describe("transfers across a UTC midnight (real stack; the origin's and the enclave's clock one test clock)", {
  timeout: 120_000,
}, () => {
  const clock = movableClock();
  // Per-transaction 10 USDC, daily 50 USDC, sealed and the origin's alike.
  const stack = useMoneyStack({ enclaveNow: () => clock.now() }, { timeoutMs: 180_000 });
  /** Set: the hop to the enclave takes the clock past midnight (2.5 s on) before the enclave reads it. */
  let midnightOnTheWay = false;
  const origin = useStackOrigin(
    "origin",
    stack,
    (): { signer: SignerClient; clock: Clock } => ({
      signer: {
        ...stack.signer,
        signTransfer: (params) => {
          if (midnightOnTheWay) clock.advance(2_500);
          return stack.signer.signTransfer(params);
        },
      },
      clock,
    }),
    { timeoutMs: 180_000 },
  );

  it("a transfer asked for before midnight and signed after it counts on the enclave's day at the gateway too: that day's refusal is the gateway's, with what remains, where the enclave refused what the gateway let through", async () => {
    const agent = await stack.newAgent({ units: 100_000_000n });
    const calls = agentCalls(origin.base, agent.token);
    const to = newAccount().address;
    // Two seconds before a UTC midnight: the origin reads its clock well before it.
    const midnight = new Date(startOfUtcDay(clock.now()).getTime() + 86_400_000);
    clock.set(new Date(midnight.getTime() - 2_000));

    midnightOnTheWay = true;
    const boundary = await calls
      .transfer({ idempotency_key: newKey(), to, amount: "9990000" })
      .finally(() => {
        midnightOnTheWay = false;
      });
    expect(isAccepted(boundary)).toBe(true);
    expect(clock.now().getTime()).toBeGreaterThan(midnight.getTime());
    // Four more in the new day: five of 9.99 USDC and their fees, under the day's 50 USDC.
    for (let i = 0; i < 4; i++) {
      expect(isAccepted(await calls.transfer({ idempotency_key: newKey(), to, amount: "9990000" }))).toBe(
        true,
      );
    }
    // 6 USDC more is over what remains of the day by the enclave's count, which holds all five.
    const over = await calls.transfer({ idempotency_key: newKey(), to, amount: "6000000" });
    expect({ status: over.status, body: over.body }).toMatchObject({
      status: 403,
      body: {
        error: {
          code: "limit_exceeded",
          limit: "daily",
          limit_units: "50000000",
          remaining_units: expect.stringMatching(/^\d+$/),
          message: expect.stringContaining("over what remains of today's limit"),
        },
      },
    });
    const spent = await queryRows<{ day: string; transfers: number }>(
      stack.db.handle.db,
      sql`select day::text as day, transfers from transfer_daily_spend
          where agent_id = ${agent.agentId} and transfers > 0 order by day`,
    );
    expect(spent).toEqual([{ day: utcDate(midnight), transfers: 5 }]);
  });
});
