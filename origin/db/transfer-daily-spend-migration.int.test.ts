import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

describe("migration 0009 (transfer_daily_spend)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0009_transfer_daily_spend");

  it("counts the transfers signed before it, per agent and UTC day, and nothing else", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const agents = [hex(16), hex(16)].map(
      (h) => `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`,
    );
    for (const agentId of agents) {
      await db.execute(sql`insert into agent_identities (agent_id, assigned_wallet, agent_transfer_key_ref, capabilities, origin)
        values (${agentId}, ${`0x${hex(20)}`}, ${hex(32)}, ${"{read,faucet,transfer}"}, 'operator')`);
    }
    const [first, second] = agents as [string, string];
    const action = (agentId: string, kind: string, costUnits: string | null, signedAt: string | null) =>
      db.execute(sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, cost_units, signed_at)
        values (${agentId}, ${kind}, ${hex(8)}, ${hex(32)}, ${signedAt ? "confirmed" : "requested"},
                ${costUnits}::numeric, ${signedAt}::timestamptz)`);
    // Transfers on two UTC days (one signed in the evening west of Greenwich, already the next
    // day in UTC); a payout, an x402 authorization and an unsigned request count for nothing.
    await action(first, "transfer", "100", "2026-11-25T10:00:00Z");
    await action(first, "transfer", "250", "2026-11-25T20:30:00-05:00");
    await action(first, "transfer", "7", "2026-11-26T00:00:01Z");
    await action(first, "faucet", "1000", "2026-11-25T11:00:00Z");
    await action(first, "x402", "10000", "2026-11-25T12:00:00Z");
    await action(first, "transfer", null, null);
    await action(second, "transfer", "40", "2026-11-25T09:00:00Z");

    await migrateDatabase(db);

    const rows = await queryRows<{ agent_id: string; day: string; spent_units: string }>(
      db,
      sql`select agent_id, day::text, spent_units::text from transfer_daily_spend order by agent_id, day`,
    );
    expect(rows).toEqual(
      [
        { agent_id: first, day: "2026-11-25", spent_units: "100" },
        { agent_id: first, day: "2026-11-26", spent_units: "257" },
        { agent_id: second, day: "2026-11-25", spent_units: "40" },
      ].sort((a, b) => (a.agent_id + a.day < b.agent_id + b.day ? -1 : 1)),
    );
  });
});
