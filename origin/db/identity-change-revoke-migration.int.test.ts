import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { adminQuery, withDatabase } from "../../testing/global-setup.ts";
import { migrationsBefore } from "../../testing/migrations-before.ts";
import { connectDatabase, type DatabaseHandle, queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

describe("migration 0028 (identity_changes names the change: disable, enable or revoke)", () => {
  const adminUrl = inject("pgAdminUrl");
  const name = `agents_migration_${hex(6)}`;
  let handle: DatabaseHandle;
  let before: string;

  beforeAll(async () => {
    await adminQuery(adminUrl, `create database "${name}"`);
    handle = connectDatabase({ url: withDatabase(adminUrl, name), driver: "pg" });
    before = await migrationsBefore("0028_identity_change_revoke");
  });
  afterAll(async () => {
    await handle?.close();
    await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
    await rm(before, { recursive: true, force: true });
  });

  it("names each earlier row from its before and after, and refuses a change its flags contradict", async () => {
    const { db } = handle;
    await migrateDatabase(db, before);
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
