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

  /** An earlier version's settlements, on a database migrated past 0046, and this version's presentations of them. */
  const beside = async () => {
    // Fake (the one part that is not this version's): the writes of an origin of the earlier
    // version, running beside this one, done by hand as its claim, its store statement (owing the
    // answer in the column) and its settler's take once its receipt came would do them; and the
    // tracker's record of the receipt, late.
    const db = databases[1]!.db;
    await migrateDatabase(db);
    const payer = hex(20);
    const where = (nonce: string) => sql`payer = ${payer} and nonce = ${nonce}`;
    return {
      /** A presentation here; no time to wait (holdMs: the receipt wait and 5 s), so one in flight is answered pending at once. */
      presentNow: (nonce: `0x${string}`, payload: unknown) =>
        earlierPresentation(
          { db, receiptTimeoutMs: -5_000, validityMarginSeconds: 6 },
          { authorization: { from: payer, nonce }, payload },
        ).then((outcome) => ({ kind: outcome.kind, reason: outcome.response.errorReason })),
      present: (nonce: `0x${string}`, payload: unknown) => present(db, payer, nonce, payload),
      claim: async (payload: unknown): Promise<`0x${string}`> => {
        const nonce = hex(32);
        await db.execute(
          sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
                valid_after, valid_before, signature)
              values (${payer}, ${nonce}, ${hex(20)}, 1, '', ${sha256(payload)}, 0, 1, '0x')`,
        );
        return nonce;
      },
      stores: (nonce: string) =>
        db.execute(
          sql`update x402_settlements set status = 'submitted', tx_hash = ${hex(32)}, retry_owed = true where ${where(nonce)}`,
        ),
      settlerTakes: async (nonce: string) =>
        expect(
          await queryRows(
            db,
            sql`update x402_settlements set retry_owed = false where ${where(nonce)} and retry_owed returning 1`,
          ),
        ).toHaveLength(1),
      mined: (nonce: string) =>
        db.execute(sql`update x402_settlements set status = 'settled' where ${where(nonce)}`),
    };
  };
  const PENDING = { kind: "duplicate", reason: "settlement_pending" };

  it("owes no second answer for a settlement an earlier version stores and whose settler took the column's answer before a presentation here was answered pending", async () => {
    // Its settler answered paid, its receipt not yet recorded; a presentation here waiting on it
    // runs out of time. Mutation: oweRetry owing an answer for a settlement that owes none in
    // either place pays the retry a second time.
    const earlier = await beside();
    const payload = { payment: "taken by the earlier version's settler" };
    const nonce = await earlier.claim(payload);
    await earlier.stores(nonce);
    await earlier.settlerTakes(nonce);
    expect(await earlier.presentNow(nonce, payload)).toEqual(PENDING);
    await earlier.mined(nonce);
    expect(await earlier.present(nonce, payload)).toEqual(NONCE_USED);
  });

  it("owes no second answer for a settlement an earlier version claimed and a presentation here was answered pending before that version stored it", async () => {
    // That version's store owes the answer in the column, and its settler takes it there.
    // Mutation: oweRetry owing it in x402_paid_answers meanwhile pays the retry here too.
    const earlier = await beside();
    const payload = { payment: "pending before the earlier version stored it" };
    const nonce = await earlier.claim(payload);
    expect(await earlier.presentNow(nonce, payload)).toEqual(PENDING);
    await earlier.stores(nonce);
    await earlier.settlerTakes(nonce);
    await earlier.mined(nonce);
    expect(await earlier.present(nonce, payload)).toEqual(NONCE_USED);
  });
});
