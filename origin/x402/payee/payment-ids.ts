/**
 * Payment identifiers in Postgres (docs/x402.md#payment-identifiers), shared by every origin: a
 * payer's id is bound to the fingerprint of one request (payment-identifier.ts) and to the nonce of
 * the presentation that settles it. A later presentation with the id is that settlement's, never a
 * second one: another authorization for the same request is answered from the bound settlement,
 * one for another request is a conflict.
 */
import { sql } from "drizzle-orm";
import { sleep } from "../../../shared/sleep.ts";
import { type Db, queryRows } from "../../db/client.ts";
import { NO_FLUSH_WAIT } from "../../db/no-flush-wait.ts";
import { preparedStatement, runPrepared } from "../../db/prepared.ts";

/**
 * How long a binding whose settlement is not claimed yet counts as in flight. A settle claims its
 * payment within its batch, well inside this; a binding left by an origin that died before the
 * claim is taken over once this has passed.
 */
const HOLD_SECONDS = 60;
/** How often a presentation waits on another one in flight with the same id. */
const POLL_MS = 50;

export type PaymentIdRequest = { payer: string; paymentId: string; fingerprint: string; nonce: string };

export type Binding =
  /** This presentation answers for the id: settle it. */
  | { kind: "bound" }
  /** The id answers with the settlement of `nonce`, an earlier presentation's. */
  | { kind: "settled_by"; nonce: string }
  /** The payer gave this id to another request. */
  | { kind: "conflict" };

/**
 * The fingerprint an id is bound to, if it is, and the state of its bound settlement when that
 * settlement was claimed under this id (null: none): read by every verify that carries an id.
 */
export const boundFingerprintStatement = preparedStatement<"payer" | "paymentId">(
  "x402_payment_id_fingerprint",
  sql`select p.fingerprint, s.status as settlement from x402_payment_ids p
      left join x402_settlements s on s.payer = p.payer and s.nonce = p.nonce
        and s.payment_id = p.payment_id
      where p.payer = ${sql.placeholder("payer")} and p.payment_id = ${sql.placeholder("paymentId")}`,
).returns({ fingerprint: "text", settlement: "text?" });

/**
 * The binding of the id as it stands, for verify (nothing is written), as a settle now would take
 * it (bindPaymentId): another request's (`conflict`); this request's, with a settlement that
 * answers for it whatever authorization this presentation carries (`answered`: settled, or in
 * flight); or none that answers (`free`), so the presentation's own authorization is what settles.
 */
export async function paymentIdStanding(
  db: Db,
  request: PaymentIdRequest,
): Promise<"conflict" | "answered" | "free"> {
  const [row] = await runPrepared(db, boundFingerprintStatement, request);
  if (row === undefined) return "free";
  if (row.fingerprint !== request.fingerprint) return "conflict";
  const answers =
    row.settlement === "claimed" || row.settlement === "submitted" || row.settlement === "settled";
  return answers ? "answered" : "free";
}

/**
 * Binds an id no presentation holds yet: a row with the nonce, or none when one is there. Its
 * commit does not wait for the WAL flush (NO_FLUSH_WAIT): a binding matters once a settlement of
 * its nonce is claimed, and the claim commits after it, so the flush that makes the claim durable
 * makes the binding durable too. A crash of the database before then loses a binding whose payment
 * nothing claimed, and the id binds again on the payer's retry.
 */
export const bindStatement = preparedStatement<"payer" | "paymentId" | "fingerprint" | "nonce">(
  "x402_payment_id_bind",
  sql`with ${NO_FLUSH_WAIT},
      bound as (
        insert into x402_payment_ids (payer, payment_id, fingerprint, nonce, held_until)
        values (${sql.placeholder("payer")}, ${sql.placeholder("paymentId")}, ${sql.placeholder("fingerprint")},
                ${sql.placeholder("nonce")}, now() + make_interval(secs => ${HOLD_SECONDS}))
        on conflict (payer, payment_id) do nothing
        returning nonce)
      select nonce from bound, no_flush_wait`,
).returns({ nonce: "text" });

/**
 * Binds the id to this presentation, or says which settlement answers for it. A bound
 * settlement that ended without moving money (failed, reverted) or was never claimed (released,
 * or abandoned past its hold) gives the id to this presentation; one claimed by another presentation
 * still in flight is waited for.
 */
export async function bindPaymentId(db: Db, request: PaymentIdRequest): Promise<Binding> {
  const { payer, paymentId, fingerprint, nonce } = request;
  for (;;) {
    const inserted = await runPrepared(db, bindStatement, request);
    if (inserted.length > 0) return { kind: "bound" };
    const [row] = await queryRows<{
      fingerprint: string;
      nonce: string;
      lapsed: boolean;
      settlement: string | null;
      claimed_otherwise: boolean | null;
    }>(
      db,
      sql`select p.fingerprint, p.nonce, p.held_until < now() as lapsed, s.status as settlement,
            s.payment_id is distinct from p.payment_id as claimed_otherwise
          from x402_payment_ids p
          left join x402_settlements s on s.payer = p.payer and s.nonce = p.nonce
          where p.payer = ${payer} and p.payment_id = ${paymentId}`,
    );
    if (!row) continue; // released meanwhile: bind it again
    if (row.fingerprint !== fingerprint) return { kind: "conflict" };
    // The same authorization again: the settler answers it as this request presented again, if
    // its settlement was claimed under this id (earlier-presentation.ts).
    if (row.nonce === nonce) return { kind: "bound" };
    // A settlement of the bound nonce claimed under no id or another (a payment already settled,
    // presented again with this id added: the id is not signed) was never this request's.
    const over =
      row.settlement === "failed" ||
      row.settlement === "reverted" ||
      (row.settlement !== null && row.claimed_otherwise);
    if (row.settlement !== null && !over) return { kind: "settled_by", nonce: row.nonce };
    if (over || row.lapsed) {
      const taken = await queryRows<{ nonce: string }>(
        db,
        sql`update x402_payment_ids set nonce = ${nonce}, held_until = now() + make_interval(secs => ${HOLD_SECONDS})
            where payer = ${payer} and payment_id = ${paymentId} and nonce = ${row.nonce}
            returning nonce`,
      );
      if (taken.length > 0) return { kind: "bound" };
      continue;
    }
    // Another presentation holds the id and has not claimed its payment yet.
    await sleep(POLL_MS);
  }
}

/**
 * After this presentation's settle: an id whose payment nothing was claimed for (refused before
 * signing) is free again, so a fresh authorization for the same request may settle. One whose
 * settlement exists stays bound to it.
 */
export async function releasePaymentId(db: Db, request: PaymentIdRequest): Promise<void> {
  await db.execute(
    sql`delete from x402_payment_ids p
        where p.payer = ${request.payer} and p.payment_id = ${request.paymentId} and p.nonce = ${request.nonce}
          and not exists (select 1 from x402_settlements s where s.payer = p.payer and s.nonce = p.nonce)`,
  );
}
