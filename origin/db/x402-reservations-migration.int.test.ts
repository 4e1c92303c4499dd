import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): string => `0x${randomBytes(bytes).toString("hex")}`;

describe("migration 0031 (x402_reservations: what a payer's balance may not show yet)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0031_x402_reservations");

  it("copies the settlements in flight and those mined within the sweep's hour, with their blocks, and none other", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const payer = hex(20);
    const now = Math.floor(Date.now() / 1000);
    let nonce = 0;
    const transaction = async (status: string, blockNumber: number | null) => {
      const txHash = hex(32);
      const [row] = await queryRows<{ tx_id: string }>(
        db,
        sql`insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, status, block_number)
            values ('settlement', ${hex(20)}, ${nonce++}, ${txHash}, '0x', 0, ${status}, ${blockNumber})
            returning tx_id`,
      );
      return { txId: row!.tx_id, txHash };
    };
    const settlement = async (
      status: string,
      validBefore: number,
      tx?: { txId: string; txHash: string },
    ): Promise<string> => {
      const [row] = await queryRows<{ id: string }>(
        db,
        sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
              valid_after, valid_before, signature, status, tx_id, tx_hash)
            values (${payer}, ${hex(32)}, ${hex(20)}, ${validBefore % 1000}, '', '', 0, ${validBefore}, '0x',
              ${status}, ${tx?.txId ?? null}, ${tx?.txHash ?? null})
            returning id`,
      );
      return row!.id;
    };
    const submittedTx = await transaction("submitted", null);
    const minedTx = await transaction("confirmed", 7);
    const claimed = await settlement("claimed", now + 60);
    const submitted = await settlement("submitted", now + 61, submittedTx);
    const mined = await settlement("settled", now - 3_000, minedTx);
    await settlement("settled", now - 4_000, await transaction("confirmed", 5)); // past the sweep
    await settlement("reverted", now + 62, await transaction("reverted", 8));
    await settlement("failed", now + 63, await transaction("failed", null));

    await migrateDatabase(db);

    expect(
      await queryRows(
        db,
        sql`select settlement_id, payer, amount_units::text as units, valid_before::text, tx_hash,
              settled_block::text from x402_reservations order by valid_before`,
      ),
    ).toEqual([
      {
        settlement_id: mined,
        payer,
        units: String((now - 3_000) % 1000),
        valid_before: String(now - 3_000),
        tx_hash: minedTx.txHash,
        settled_block: "7",
      },
      {
        settlement_id: claimed,
        payer,
        units: String((now + 60) % 1000),
        valid_before: String(now + 60),
        tx_hash: null,
        settled_block: null,
      },
      {
        settlement_id: submitted,
        payer,
        units: String((now + 61) % 1000),
        valid_before: String(now + 61),
        tx_hash: submittedTx.txHash,
        settled_block: null,
      },
    ]);
    // …and goes with its settlement.
    await db.execute(sql`delete from x402_settlements where id = ${claimed}`);
    expect(
      await queryRows(db, sql`select settlement_id from x402_reservations where settlement_id = ${claimed}`),
    ).toEqual([]);
  });
});
