import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

describe("migration 0028 (identity_changes names the change: disable, enable or revoke)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0028_identity_change_revoke");

  it("names each earlier row from its before and after, and refuses a change its flags contradict", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const [identity] = await queryRows<{ agent_id: string }>(
      db,
      sql`insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin)
          values (${`0x${hex(20)}`}, ${hex(32)}, '{read}', 'operator') returning agent_id`,
    );
    const agentId = identity!.agent_id;
    await db.execute(
      sql`insert into identity_changes (agent_id, before_enabled, after_enabled, reason, source, changed_at)
          values (${agentId}, true, false, 'paused', 'cli', now() - interval '1 minute'),
                 (${agentId}, false, true, 'cleared', 'console', now())`,
    );

    await migrateDatabase(db);

    expect(
      await queryRows(
        db,
        sql`select change, before_enabled, after_enabled, reason from identity_changes order by changed_at`,
      ),
    ).toEqual([
      { change: "disable", before_enabled: true, after_enabled: false, reason: "paused" },
      { change: "enable", before_enabled: false, after_enabled: true, reason: "cleared" },
    ]);
    const record = (change: string, beforeEnabled: boolean, afterEnabled: boolean) =>
      db.execute(
        sql`insert into identity_changes (agent_id, change, before_enabled, after_enabled, reason, source)
            values (${agentId}, ${change}, ${beforeEnabled}, ${afterEnabled}, 'x', 'cli')`,
      );
    // A revocation leaves the flag as it was, whichever it was.
    await record("revoke", true, true);
    await record("revoke", false, false);
    for (const [change, from, to] of [
      ["revoke", true, false],
      ["disable", false, true],
      ["enable", true, true],
      ["delete", true, false],
    ] as const) {
      await expect(record(change, from, to), `${change} ${from} → ${to}`).rejects.toMatchObject({
        cause: expect.objectContaining({ constraint: "identity_changes_change_matches" }),
      });
    }
  });
});
