import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { earlierPresentation, sha256 } from "../x402/payee/earlier-presentation.ts";
import type { Db } from "./client.ts";
import { queryRows } from "./client.ts";
import { migrateDatabase } from "./migrate.ts";

const hex = (bytes: number): `0x${string}` => `0x${randomBytes(bytes).toString("hex")}`;

/** A presentation of `payload` for (payer, nonce), as the facilitator's settle makes one of a settled payment. */
const present = (db: Db, payer: `0x${string}`, nonce: `0x${string}`, payload: unknown) =>
  earlierPresentation(
    { db, receiptTimeoutMs: 0, validityMarginSeconds: 6 },
    {
      authorization: { from: payer, nonce },
      payload,
    },
  ).then((outcome) => ({ kind: outcome.kind, reason: outcome.response.errorReason }));

const PAID = { kind: "settled", reason: undefined };
const NONCE_USED = { kind: "duplicate", reason: "invalid_exact_evm_nonce_already_used" };

describe("migration 0046 (x402_paid_answers: the paid answer a settlement owes, out of its row)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0046_x402_paid_answers", 2);

  it("keeps the answers owed before it, owed once, and answers a settlement an earlier version stores after it as that version would", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    const payer = hex(20);
    const settlement = async (payload: unknown, retryOwed: boolean): Promise<`0x${string}`> => {
      const nonce = hex(32);
      await db.execute(
        sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
              valid_after, valid_before, signature, status, tx_hash, retry_owed)
            values (${payer}, ${nonce}, ${hex(20)}, 1, '', ${sha256(payload)}, 0, 1, '0x', 'settled', ${hex(32)},
              ${retryOwed})`,
      );
      return nonce;
    };
    const owedPayload = { payment: "owed" };
    const owed = await settlement(owedPayload, true);
    const answeredPayload = { payment: "answered" };
    const answered = await settlement(answeredPayload, false);

    await migrateDatabase(db);

    expect(
      await queryRows(db, sql`select count(*)::int as n from x402_settlements where retry_owed`),
    ).toEqual([{ n: 0 }]);
    // The answer owed before is owed to its own payload, once; none is owed where none was.
    expect(await present(db, payer, owed, { payment: "another payload" })).toEqual(NONCE_USED);
    expect(await present(db, payer, owed, owedPayload)).toEqual(PAID);
    expect(await present(db, payer, owed, owedPayload)).toEqual(NONCE_USED);
    expect(await present(db, payer, answered, answeredPayload)).toEqual(NONCE_USED);

    // An origin of the earlier version, still running beside this one, stores a settlement owing
    // its answer in the column: this version answers it paid once too.
    const legacyPayload = { payment: "stored by an earlier version" };
    const legacy = await settlement(legacyPayload, true);
    expect(await present(db, payer, legacy, legacyPayload)).toEqual(PAID);
    expect(await present(db, payer, legacy, legacyPayload)).toEqual(NONCE_USED);
  });

  it("answers a settlement an earlier version stores beside it as that version would: a presentation here answered pending owes its retry one paid answer", async () => {
    // Fake (the one part that is not this version's): the writes of an origin of the version
    // before 0046, running beside this one, done by hand: its claim, its store (which owes
    // nothing: that version owes an answer only to a presentation it answers pending, and its
    // settler's paid answer takes none), and the tracker's record of the receipt. Mutation: a
    // pending answer here owing nothing answers the retry 402 nonce used: paid, nothing delivered.
    const db = databases[1]!.db;
    await migrateDatabase(db);
    const payer = hex(20);
    const payload = { payment: "stored by an earlier version beside this one" };
    const nonce = hex(32);
    const where = sql`payer = ${payer} and nonce = ${nonce}`;
    await db.execute(
      sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
            valid_after, valid_before, signature)
          values (${payer}, ${nonce}, ${hex(20)}, 1, '', ${sha256(payload)}, 0, 1, '0x')`,
    );
    await db.execute(
      sql`update x402_settlements set status = 'submitted', tx_hash = ${hex(32)} where ${where}`,
    );
    // A presentation here with no time to wait (holdMs: the receipt wait and 5 s): answered pending.
    const pending = await earlierPresentation(
      { db, receiptTimeoutMs: -5_000, validityMarginSeconds: 6 },
      { authorization: { from: payer, nonce }, payload },
    );
    expect(pending.response.errorReason).toBe("settlement_pending");
    await db.execute(sql`update x402_settlements set status = 'settled' where ${where}`);
    expect(await present(db, payer, nonce, payload)).toEqual(PAID);
    expect(await present(db, payer, nonce, payload)).toEqual(NONCE_USED);
  });
});
