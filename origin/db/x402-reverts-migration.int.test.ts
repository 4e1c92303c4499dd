import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => `0x${randomBytes(bytes).toString("hex")}`;

describe("migration 0030 (x402_reverts: the settlements that reverted, for the revert guard)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0030_x402_reverts");

  it("records each settlement that had reverted, at the time its row last changed, and none other", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const payer = hex(20);
    const settlement = (status: string, updatedAt: string) =>
      queryRows<{ id: string }>(
        db,
        sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
              valid_after, valid_before, signature, status, updated_at)
            values (${payer}, ${hex(32)}, ${hex(20)}, 1, '', '', 0, 1, '0x', ${status}, ${updatedAt}::timestamptz)
            returning id`,
      ).then((rows) => rows[0]!.id);
    const reverted = await settlement("reverted", "2026-11-30T10:00:00Z");
    await settlement("settled", "2026-11-30T10:01:00Z");
    await settlement("submitted", "2026-11-30T10:02:00Z");

    await migrateDatabase(db);

    expect(
      await queryRows(
        db,
        sql`select settlement_id, payer, to_char(reverted_at at time zone 'UTC', 'HH24:MI') as at from x402_reverts`,
      ),
    ).toEqual([{ settlement_id: reverted, payer, at: "10:00" }]);
    // …and goes with its settlement.
    await db.execute(sql`delete from x402_settlements where id = ${reverted}`);
    expect(await queryRows(db, sql`select * from x402_reverts`)).toEqual([]);
  });
});
