import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => `0x${randomBytes(bytes).toString("hex")}`;
const paymentId = (): string => `pay_${randomBytes(12).toString("hex")}`;

describe("migration 0039 (x402_settlements.payment_id: the id a settlement was claimed under)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0039_x402_settlement_payment_id");

  it("gives each settlement made before it the id first bound to its nonce, and none to a settlement no id named", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const payer = hex(20);
    const settlement = async (nonce: string): Promise<void> => {
      await db.execute(
        sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
              valid_after, valid_before, signature, status)
            values (${payer}, ${nonce}, ${hex(20)}, 1, '', '', 0, 1, '0x', 'settled')`,
      );
    };
    const bind = async (id: string, nonce: string, createdAt: string): Promise<void> => {
      await db.execute(
        sql`insert into x402_payment_ids (payer, payment_id, fingerprint, nonce, held_until, created_at)
            values (${payer}, ${id}, 'f', ${nonce}, now(), ${createdAt}::timestamptz)`,
      );
    };
    const named = hex(32);
    const unnamed = hex(32);
    await settlement(named);
    await settlement(unnamed);
    const first = paymentId();
    const later = paymentId();
    // A later id bound to the same nonce: what the replay this column stops could leave behind.
    await bind(later, named, "2026-12-05T10:01:00Z");
    await bind(first, named, "2026-12-05T10:00:00Z");

    await migrateDatabase(db);

    const rows = await queryRows<{ nonce: string; payment_id: string | null }>(
      db,
      sql`select nonce, payment_id from x402_settlements where payer = ${payer} order by nonce`,
    );
    expect(Object.fromEntries(rows.map((row) => [row.nonce, row.payment_id]))).toEqual({
      [named]: first,
      [unnamed]: null,
    });
  });
});
