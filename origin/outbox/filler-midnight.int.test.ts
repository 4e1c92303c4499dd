import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { movableClock } from "../../testing/movable-clock.ts";
import { startTestOrigin } from "../../testing/origin.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { startOfUtcDay, utcDate } from "../agent-actions/utc-day.ts";
import { queryRows } from "../db/client.ts";

// A filler from an agent's wallet signed in the first moment of a UTC day, whose store statement
// runs on a database whose clock still reads the day before. The enclave counts the filler's most
// possible fee on its day, the hard bound of the agent's daily limit; the gateway must count it on
// that day too, for that day's refusals to be its own, with what remains. The origin and the
// enclave (its own server, in this process) read one test clock (testing/movable-clock.ts, the one
// fake: no process's clock can be moved to a midnight); Postgres reads the real one, before it.

const LIMIT = 1_000_000n;
const to = newAccount().address;

describe("a filler signed across a UTC midnight (real stack; the origin's and the enclave's clock one test clock)", {
  timeout: 120_000,
}, () => {
  const clock = movableClock();
  // A daily limit of 1 USDC, sealed and the origin's alike; the stack's own origin's tracker is
  // slowed right down, so the origin below, behind the refusing pass-through, signs the filler.
  const stack = useMoneyStack(
    { enclaveNow: () => clock.now(), tracker: { periodMs: 3_600_000 }, policy: { dailyLimitUnits: LIMIT } },
    { timeoutMs: 180_000 },
  );
  const proxy = useFixture(
    "refusing pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (refusing) => refusing.close(),
    { timeoutMs: 120_000 },
  );
  let midnight = new Date(0);
  let olderEnclave = false;
  const origin = useFixture(
    "origin",
    () =>
      startTestOrigin({
        database: stack.db.handle,
        rpcUrl: proxy.url,
        env: stack.originEnv,
        tracker: { periodMs: 100, signedGraceMs: 500 },
        clock,
        signer: {
          ...stack.signer,
          // The filler is signed just past midnight by the two clocks, the database's still before it.
          signFiller: async (params) => {
            if (clock.now() < midnight) clock.set(new Date(midnight.getTime() + 1_000));
            const signed = await stack.signer.signFiller(params);
            // An enclave older than counted_on, the one fake of the second test: its answer names no day.
            return signed.ok && olderEnclave
              ? { ...signed, value: { ...signed.value, countedOn: null } }
              : signed;
          },
        },
      }),
    (started) => started.close(),
    { timeoutMs: 180_000 },
  );

  /**
   * A transfer of `agent` refused by every node until a filler took its nonce, the tracker's: the
   * transfer's and the filler's cost as their actions hold them, once the transfer ended failed.
   */
  const filledTransfer = async (agent: StackAgent): Promise<{ transferCost: bigint; fillerCost: bigint }> => {
    const wallet = agent.wallet.toLowerCase();
    const calls = agentCalls(origin.base, agent.token);
    const refusing = proxy.refuseEvery((tx) => tx.from === wallet && tx.to !== wallet && tx.nonce === 0);
    let stuck: ActionView;
    try {
      const answer = await calls.transfer({ idempotency_key: newKey(), to, amount: "2500" });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      stuck = await calls.settled((answer.body as ActionView).action_id, 60_000);
    } finally {
      refusing.stop();
    }
    expect(stuck).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
    const costs = await queryRows<{ kind: string; cost_units: string }>(
      stack.db.handle.db,
      sql`select kind, cost_units::text as cost_units from agent_actions
          where agent_id = ${agent.agentId} order by created_at`,
    );
    expect(costs.map((row) => row.kind)).toEqual(["transfer", "filler"]);
    const [transferCost, fillerCost] = costs.map((row) => BigInt(row.cost_units)) as [bigint, bigint];
    expect(fillerCost).toBeGreaterThan(0n);
    return { transferCost, fillerCost };
  };
  const spentDays = (agent: StackAgent) =>
    queryRows<{ day: string; spent_units: string }>(
      stack.db.handle.db,
      sql`select day::text as day, spent_units::text as spent_units from transfer_daily_spend
          where agent_id = ${agent.agentId} order by day`,
    );

  it("counts a filler signed after midnight on the enclave's day at the gateway too: that day's refusal is the gateway's, with what remains after the filler's fee, where the enclave refused what the gateway let through; the day before holds the stuck transfer alone", async () => {
    const agent = await stack.newAgent({ units: 2_000_000n });
    const calls = agentCalls(origin.base, agent.token);
    midnight = new Date(startOfUtcDay(clock.now()).getTime() + 86_400_000);
    clock.set(new Date(midnight.getTime() - 60_000));

    // Its payment at nonce 0 is refused by every node it reaches: the tracker fills its nonce.
    const { transferCost, fillerCost } = await filledTransfer(agent);
    expect(clock.now().getTime()).toBeGreaterThan(midnight.getTime());

    // Over what remains of the day by the enclave's count, which holds the filler's fee (the sealed
    // fee ceiling's whole allowance: a filler outbids at it, chain/fees.ts replacement), and under
    // the limit by a count without it (its own fee is a few gwei a gas). Mutation: the filler counted
    // on the database's day (the code before) lets it through to the enclave, which refuses it.
    const amount = LIMIT - fillerCost / 2n;
    const over = await calls.transfer({ idempotency_key: newKey(), to, amount: amount.toString() });
    expect({ status: over.status, body: over.body }).toMatchObject({
      status: 403,
      body: {
        error: {
          code: "limit_exceeded",
          limit: "daily",
          limit_units: LIMIT.toString(),
          remaining_units: (LIMIT - fillerCost).toString(),
        },
      },
    });
    expect(await spentDays(agent)).toEqual([
      { day: utcDate(new Date(midnight.getTime() - 1)), spent_units: transferCost.toString() },
      { day: utcDate(midnight), spent_units: fillerCost.toString() },
    ]);
  });

  it("counts a filler on the database's day when the enclave's answer names none (an enclave older than counted_on)", async () => {
    // Mutation: no fallback for a filler without a day fails the statement that stores it: the
    // filler is never stored, and the transfer it replaced never ends.
    olderEnclave = true;
    try {
      const agent = await stack.newAgent({ units: 2_000_000n });
      const { transferCost, fillerCost } = await filledTransfer(agent);
      // The transfer on the origin's day, past the test's midnight; the filler on the database's.
      const [databaseDay] = await queryRows<{ day: string }>(
        stack.db.handle.db,
        sql`select (now() at time zone 'utc')::date::text as day`,
      );
      // One day when the test runs alone, its clock then the database's.
      const expected = new Map<string, bigint>([[databaseDay!.day, fillerCost]]);
      const originDay = utcDate(clock.now());
      expected.set(originDay, (expected.get(originDay) ?? 0n) + transferCost);
      expect(await spentDays(agent)).toEqual(
        [...expected]
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([day, units]) => ({ day, spent_units: units.toString() })),
      );
    } finally {
      olderEnclave = false;
    }
  });
});
