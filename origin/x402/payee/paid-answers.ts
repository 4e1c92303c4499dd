/**
 * The one answer as paid a settlement owes (x402_paid_answers; docs/x402.md#after-settlement_pending-retry-the-same-payment):
 * owed from the statement that stores the settlement (settle.ts storeStatement), taken by the
 * presentation answered paid (settle.ts for the one that settled it, earlier-presentation.ts for
 * a later one), so that a seller delivers once for one payment.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../../db/client.ts";
import type { Authorization } from "./payment.ts";

/** What names a payment: its payer and its authorization's nonce. */
export type PaymentKey = Pick<Authorization, "from" | "nonce">;

/**
 * Takes the paid answer owed to the payment for this payload (the claim's own: a retry presents
 * what was answered pending, and the presentation that settled it presents it too), or, without
 * one, whatever the payload (its payment id's presentation is paid); true when it was still owed,
 * and so this presentation is the one answered paid. One small write to x402_paid_answers: the
 * settlement row, whose every update fires its events' and state counts' triggers, is not written.
 */
export async function takePaidAnswer(
  db: Db,
  authorization: PaymentKey,
  payloadHash?: string,
): Promise<boolean> {
  const samePayload = payloadHash === undefined ? sql`` : sql` and x.payload_hash = ${payloadHash}`;
  const taken = await queryRows(
    db,
    sql`update x402_paid_answers a set taken_at = now()
        from x402_settlements x
        where x.payer = ${authorization.from} and x.nonce = ${authorization.nonce}${samePayload}
          and a.settlement_id = x.id and a.taken_at is null
        returning 1`,
  );
  return taken.length > 0;
}

/**
 * Whether a settle of this payload now would be answered paid by the settlement of its (from,
 * nonce), in flight or settled: claimed under no payment id, with this payload, and its one paid
 * answer still owed (earlier-presentation.ts, which a settle of it waits in). Verify reads it, so
 * that a seller that verifies before it settles does not refuse the retry a `settlement_pending`
 * answer asked for (docs/x402.md#after-settlement_pending-retry-the-same-payment).
 */
export async function paidAnswerAwaits(
  db: Db,
  authorization: PaymentKey,
  payloadHash: string,
): Promise<boolean> {
  // Owed in its own table, or, for a settlement an origin before migration 0046 stored, in its column.
  const rows = await queryRows(
    db,
    sql`select 1 from x402_settlements x
        where x.payer = ${authorization.from} and x.nonce = ${authorization.nonce}
          and x.payload_hash = ${payloadHash} and x.payment_id is null
          and x.status in ('claimed', 'submitted', 'settled')
          and coalesce((select a.taken_at is null from x402_paid_answers a where a.settlement_id = x.id),
            x.retry_owed)`,
  );
  return rows.length > 0;
}

/**
 * Gives back the paid answer of the payment, taken for a presentation whose caller left before the
 * answer was written (demo.ts): owed again, it goes to the payer's retry of the same payload, as
 * after a `settlement_pending` answer.
 */
export async function returnPaidAnswer(db: Db, authorization: PaymentKey): Promise<void> {
  await queryRows(
    db,
    sql`update x402_paid_answers a set taken_at = null
        from x402_settlements x
        where x.payer = ${authorization.from} and x.nonce = ${authorization.nonce}
          and a.settlement_id = x.id and a.taken_at is not null`,
  );
}

/**
 * Owes a settlement an origin of the version before migration 0046 stored (no x402_paid_answers
 * row) one paid answer, in its column, as that version does when it answers a presentation
 * `settlement_pending` (its settler's own paid answer takes nothing): a presentation here answered
 * pending is then paid on its retry, by either version. A claim of this version not yet stored that
 * gets it meanwhile is owed by its row once stored, and the column is not read for it.
 */
export async function oweLegacyRetry(db: Db, authorization: PaymentKey): Promise<void> {
  await queryRows(
    db,
    sql`update x402_settlements set retry_owed = true
        where payer = ${authorization.from} and nonce = ${authorization.nonce} and not retry_owed`,
  );
}

/** As takePaidAnswer, for an answer an origin of the version before migration 0046 owed in its column. */
export async function takeLegacyPaidAnswer(
  db: Db,
  authorization: PaymentKey,
  payloadHash?: string,
): Promise<boolean> {
  const samePayload = payloadHash === undefined ? sql`` : sql` and payload_hash = ${payloadHash}`;
  const taken = await queryRows(
    db,
    sql`update x402_settlements set retry_owed = false
        where payer = ${authorization.from} and nonce = ${authorization.nonce} and retry_owed${samePayload}
        returning 1`,
  );
  return taken.length > 0;
}

/** Takes gathered into one statement at most. */
const MAX_TAKES = 256;

/**
 * takePaidAnswer for the presentations that settled their payments (settle.ts), gathered: those of
 * one settle batch have their receipts from one read and ask within one event-loop turn, and one
 * statement takes all their answers, where one each cost Postgres a statement and a commit a
 * payment (docs/performance.md: gathered, the take is a tenth of a payment's statements' time). A
 * payment is settled by one presentation, so a statement holds one take per payment; another for
 * the same payment goes in a later statement, sent once the one holding the first has answered (two
 * statements on two connections take in no set order), so the first to ask is the one answered paid.
 */
export function createPaidAnswerTaker(
  db: Db,
): (authorization: PaymentKey, payloadHash: string) => Promise<boolean> {
  type Take = {
    payment: PaymentKey;
    payloadHash: string;
    resolve(taken: boolean): void;
    reject(error: unknown): void;
  };
  type Batch = { takes: Map<string, Take>; after: Promise<void>[] };
  let open: Batch | undefined;
  // The statement each payment's take was sent in, until it has answered.
  const sent = new Map<string, Promise<void>>();

  const run = async (takes: Take[]): Promise<void> => {
    const wanted = takes.map((take, i) => ({
      i,
      payer: take.payment.from,
      nonce: take.payment.nonce,
      payload_hash: take.payloadHash,
    }));
    try {
      const rows = await queryRows<{ i: number }>(
        db,
        sql`update x402_paid_answers a set taken_at = now()
            from x402_settlements x
              join json_to_recordset(${JSON.stringify(wanted)}::json) as w(i int, payer text, nonce text, payload_hash text)
                on x.payer = w.payer and x.nonce = w.nonce and x.payload_hash = w.payload_hash
            where a.settlement_id = x.id and a.taken_at is null
            returning w.i`,
      );
      const taken = new Set(rows.map((row) => row.i));
      for (const [i, take] of takes.entries()) take.resolve(taken.has(i));
    } catch (error) {
      for (const take of takes) take.reject(error);
    }
  };

  const send = (batch: Batch): void => {
    if (open === batch) open = undefined;
    // run settles every take and never rejects.
    const done = Promise.all(batch.after).then(() => run([...batch.takes.values()]));
    for (const key of batch.takes.keys()) sent.set(key, done);
    void done.then(() => {
      for (const key of batch.takes.keys()) if (sent.get(key) === done) sent.delete(key);
    });
  };

  return (payment, payloadHash) =>
    new Promise((resolve, reject) => {
      const key = `${payment.from}:${payment.nonce}`;
      if (open?.takes.has(key)) send(open);
      if (!open) {
        const fresh: Batch = { takes: new Map(), after: [] };
        open = fresh;
        // Once this turn's other receipts have been handed on.
        setImmediate(() => {
          if (open === fresh) send(fresh);
        });
      }
      const earlier = sent.get(key);
      if (earlier) open.after.push(earlier);
      open.takes.set(key, { payment, payloadHash, resolve, reject });
      if (open.takes.size >= MAX_TAKES) send(open);
    });
}
