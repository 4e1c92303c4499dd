import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../testing/database.ts";
import { type Db, queryRows } from "../../db/client.ts";
import { earlierPresentation, sha256 } from "./earlier-presentation.ts";
import { createPaidAnswerTaker, takePaidAnswer } from "./paid-answers.ts";

// docs/x402.md#the-demo-and-the-facilitator: a settled payment is answered paid once. The paid
// answer is owed from the statement that stores the settlement and taken by the presentation that
// settled it; a presentation waiting on it that runs out of time is answered settlement_pending.
// Fake (the one write here that is not the service's own): the settlement's state is written by
// hand, as the tracker leaves it when recording a receipt fails after the settling presentation
// read that receipt and took its answer, a database failure in the moment between the two.
describe("the paid answer a settlement owes, once", () => {
  let testDb: TestDatabase;
  const db = (): Db => testDb.handle.db;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const hex = (bytes: number): `0x${string}` => `0x${randomBytes(bytes).toString("hex")}`;
  const payer = hex(20);
  // No time to wait (holdMs: the receipt wait and 5 s): a payment still in flight is answered pending at once.
  const present = (nonce: `0x${string}`, payload: unknown) =>
    earlierPresentation(
      { db: db(), receiptTimeoutMs: -5_000, validityMarginSeconds: 6 },
      {
        authorization: { from: payer, nonce },
        payload,
      },
    ).then((outcome) => ({ kind: outcome.kind, reason: outcome.response.errorReason }));

  it("is not owed again to the retry of a presentation answered pending after the settling one took it", async () => {
    const payload = { payment: "one" };
    const nonce = hex(32);
    const [settlement] = await queryRows<{ id: string }>(
      db(),
      sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
            valid_after, valid_before, signature, status, tx_hash)
          values (${payer}, ${nonce}, ${hex(20)}, 1, '', ${sha256(payload)},
            0, 1, '0x', 'submitted', ${hex(32)})
          returning id`,
    );
    // Stored owing its answer (settle.ts storeStatement), which the settling presentation took
    // once its receipt came, while the settlement's row still says `submitted`.
    await db().execute(sql`insert into x402_paid_answers (settlement_id) values (${settlement!.id})`);
    expect(await takePaidAnswer(db(), { from: payer, nonce }, sha256(payload))).toBe(true);

    // The same payload, waiting on it, runs out of time: "present the same payment again".
    expect(await present(nonce, payload)).toEqual({ kind: "duplicate", reason: "settlement_pending" });
    await db().execute(sql`update x402_settlements set status = 'settled' where id = ${settlement!.id}`);
    // Its retry is not paid a second time: the seller delivered once, to the settling presentation.
    // Mutation: owing the answer again on a pending answer (oweRetry setting it untaken) pays it.
    expect(await present(nonce, payload)).toEqual({
      kind: "duplicate",
      reason: "invalid_exact_evm_nonce_already_used",
    });
  });

  it("taken in one statement for the presentations of one turn: each payment's once, the same payment twice by the first", async () => {
    const owing = async (payload: unknown): Promise<`0x${string}`> => {
      const nonce = hex(32);
      await db().execute(
        sql`with settlement as (
              insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
                valid_after, valid_before, signature, status, tx_hash)
              values (${payer}, ${nonce}, ${hex(20)}, 1, '', ${sha256(payload)}, 0, 1, '0x', 'settled', ${hex(32)})
              returning id)
            insert into x402_paid_answers (settlement_id) select id from settlement`,
      );
      return nonce;
    };
    const take = createPaidAnswerTaker(db());
    // Rounds: two statements sent at once took in no set order, and the second's duplicate won
    // about two rounds in five (CI saw it once).
    for (let round = 0; round < 10; round++) {
      const payloads = Array.from({ length: 20 }, (_, i) => ({ payment: i, round }));
      const nonces = await Promise.all(payloads.map(owing));
      // All in one turn, as a settle batch's presentations ask once its receipts are read; the
      // first payment's twice, and the second's with another payload (not its own: not paid).
      const taken = await Promise.all([
        ...nonces.map((nonce, i) => take({ from: payer, nonce }, sha256(payloads[i]))),
        take({ from: payer, nonce: nonces[0]! }, sha256(payloads[0])),
        take({ from: payer, nonce: nonces[1]! }, sha256({ payment: "another" })),
      ]);
      expect(taken).toEqual([...nonces.map(() => true), false, false]);
      // Nothing is owed after: a presentation of any of them is told the nonce is used.
      expect(await present(nonces[1]!, payloads[1])).toEqual({
        kind: "duplicate",
        reason: "invalid_exact_evm_nonce_already_used",
      });
    }
  });
});
