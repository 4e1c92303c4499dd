/**
 * The month's window of an agent's transfers counts from the first of its UTC month to today, as
 * both readers of it read transfer_daily_spend: the policy's routes (store.ts readPolicyState, what
 * GET /agent/v1/policy and its check tell) and the outbox's checks (actions/batch-store.ts
 * factsStatement, what a transfer meets). A day of the month before counts in neither.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { factsStatement } from "../actions/batch-store.ts";
import { runPrepared } from "../db/prepared.ts";
import { readPolicyState } from "./store.ts";

describe("the month's window of an agent's transfers", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  // Mid-May 2031: the last of April, the first of May and today each spent something.
  const NOW = new Date("2031-05-15T12:00:00.000Z");
  const spend = async (agentId: string) => {
    await testDb.handle.db.execute(
      sql`insert into transfer_daily_spend (agent_id, day, spent_units, transfers) values
        (${agentId}, '2031-04-30', 500000, 1), (${agentId}, '2031-05-01', 20000, 1),
        (${agentId}, '2031-05-15', 3000, 1)`,
    );
  };

  it("reads from the first of the month for the policy's routes", async () => {
    const agentId = randomUUID();
    await spend(agentId);
    const state = await readPolicyState(testDb.handle.db, agentId, NOW);
    // Mutation: a lower bound that reaches April reads 523000; one past today's first reads 3000 or 0.
    expect(state.usage.transfers.monthUnits).toBe(23000n);
    expect(state.usage.transfers.dayUnits).toBe(3000n);
  });

  it("reads from the first of the month for the outbox's checks", async () => {
    const agentId = randomUUID();
    const wallet = `0x${randomBytes(20).toString("hex")}`;
    await testDb.handle.db.execute(
      sql`insert into agent_identities (agent_id, assigned_wallet, agent_transfer_key_ref, capabilities, origin)
        values (${agentId}, ${wallet}, ${randomBytes(32).toString("hex")}, array['transfer'], 'operator')`,
    );
    await testDb.handle.db.execute(
      sql`insert into agent_policies (agent_id, policy, version)
        values (${agentId}, ${JSON.stringify({ transfers: { monthly_units: "1000000" } })}::jsonb, 1)`,
    );
    await spend(agentId);
    const [row] = await runPrepared(testDb.handle.db, factsStatement, {
      mined: "[]",
      transferAgents: `{${agentId}}`,
      day: "2031-05-15",
      monthStart: "2031-05-01",
      faucetAgents: "{}",
      dayStart: "2031-05-15T00:00:00.000Z",
      at: NOW.toISOString(),
      wallets: "{}",
      recipients: "{}",
    });
    expect(row?.policies?.[agentId]?.month).toBe("23000");
  });
});
