/**
 * Payment identifiers in Postgres (docs/x402.md#payment-identifiers), shared by every origin: a
 * payer's id is bound to the fingerprint of one request (payment-identifier.ts) and to the nonce of
 * the presentation that settles it. A later presentation with the id is that settlement's, never a
 * second one: another authorization for the same request is answered from the bound settlement,
 * one for another request is a conflict.
 */
import { sql } from "drizzle-orm";
import type { Hex } from "../../../shared/hex.ts";
import { sleep } from "../../../shared/sleep.ts";
import { type Db, queryRows } from "../../db/client.ts";
import { NO_FLUSH_WAIT } from "../../db/no-flush-wait.ts";
import { preparedStatement, runPrepared } from "../../db/prepared.ts";
import {
  authorizationUseColumns,
  authorizationUseOf,
  type ChainAuthorizationUsed,
  type KeptAuthorizationUse,
} from "./used-elsewhere.ts";

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
 * The fingerprint an id is bound to, if it is, the nonce it is bound to, the state of its bound
 * settlement when that settlement was claimed under this id (null: none), and what that settlement
 * keeps of its authorization's use (used-elsewhere.ts; `margin`:
 * AGENT_X402_VALIDITY_MARGIN_SECONDS): read by every verify that carries an id.
 */
export const boundFingerprintStatement = preparedStatement<"payer" | "paymentId" | "margin">(
  "x402_payment_id_fingerprint",
  sql`select p.fingerprint, p.nonce, x.status as settlement, x.authorization_used_elsewhere,
        ${authorizationUseColumns(sql.placeholder("margin"))}
      from x402_payment_ids p
      left join x402_settlements x on x.payer = p.payer and x.nonce = p.nonce
        and x.payment_id = p.payment_id
      where p.payer = ${sql.placeholder("payer")} and p.payment_id = ${sql.placeholder("paymentId")}`,
).returns({
  fingerprint: "text",
  nonce: "text",
  settlement: "text?",
  authorization_used_elsewhere: "bool?",
  use_final: "bool",
  ask_final: "bool?",
});

/**
 * The binding of the id as it stands, for verify (nothing is written), as a settle now would take
 * it (bindPaymentId): another request's (`conflict`); this request's, with a settlement that
 * answers for it whatever authorization this presentation carries (`answered`: settled, or in
 * flight); one whose settlement under the id ended without our transaction moving money (`ended`,
 * with the bound nonce and what the settlement keeps of its use: the id is free only if that
 * authorization is unused, since another relayer's transaction may have used it and paid for the
 * request); or none that answers (`free`), so the presentation's own authorization is what settles.
 */
export async function paymentIdStanding(
  db: Db,
  request: PaymentIdRequest,
  validityMarginSeconds: number,
): Promise<"conflict" | "answered" | "free" | { ended: string; kept: KeptAuthorizationUse }> {
  const [row] = await runPrepared(db, boundFingerprintStatement, {
    ...request,
    margin: validityMarginSeconds,
  });
  if (row === undefined) return "free";
  if (row.fingerprint !== request.fingerprint) return "conflict";
  const answers =
    row.settlement === "claimed" || row.settlement === "submitted" || row.settlement === "settled";
  if (answers) return "answered";
  // The same authorization presented again is answered by its own facts, as settle answers it.
  const ended = row.settlement === "failed" || row.settlement === "reverted";
  if (!ended || row.nonce === request.nonce) return "free";
  const kept = {
    authorization_used_elsewhere: row.authorization_used_elsewhere,
    use_final: row.use_final,
    ask_final: row.ask_final === true,
  };
  return { ended: row.nonce, kept };
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
 * How a binding learns whether the authorization of its ended settlement is used: the chain holds
 * an authorization of the payer's as used (undefined: it did not answer). The precompile takes an
 * authorization from anyone who relays it, so a settlement of ours can revert, or lose its nonce,
 * because another relayer's transaction used the same one first. `validityMarginSeconds`:
 * AGENT_X402_VALIDITY_MARGIN_SECONDS, past which an unused authorization stays unused.
 */
export type AuthorizationUseDeps = {
  authorizationUsed: ChainAuthorizationUsed;
  validityMarginSeconds: number;
};

/**
 * Binds the id to this presentation, or says which settlement answers for it. A bound
 * settlement that ended without moving money (failed, reverted, and its authorization still
 * unused on the chain) or was never claimed (released, or abandoned past its hold) gives the id to
 * this presentation; one claimed by another presentation still in flight is waited for.
 */
export async function bindPaymentId(
  db: Db,
  request: PaymentIdRequest,
  chain: AuthorizationUseDeps,
): Promise<Binding> {
  const { payer, paymentId, fingerprint, nonce } = request;
  for (;;) {
    const inserted = await runPrepared(db, bindStatement, request);
    if (inserted.length > 0) return { kind: "bound" };
    const [row] = await queryRows<
      {
        fingerprint: string;
        nonce: string;
        lapsed: boolean;
        settlement: string | null;
        claimed_otherwise: boolean | null;
      } & KeptAuthorizationUse
    >(
      db,
      sql`select p.fingerprint, p.nonce, p.held_until < now() as lapsed, x.status as settlement,
            x.payment_id is distinct from p.payment_id as claimed_otherwise, x.authorization_used_elsewhere,
            ${authorizationUseColumns(chain.validityMarginSeconds)}
          from x402_payment_ids p
          left join x402_settlements x on x.payer = p.payer and x.nonce = p.nonce
          where p.payer = ${payer} and p.payment_id = ${paymentId}`,
    );
    if (!row) continue; // released meanwhile: bind it again
    if (row.fingerprint !== fingerprint) return { kind: "conflict" };
    // The same authorization again: the settler answers it as this request presented again, if
    // its settlement was claimed under this id (earlier-presentation.ts).
    if (row.nonce === nonce) return { kind: "bound" };
    // A settlement of the bound nonce claimed under no id or another (a payment already settled,
    // presented again with this id added: the id is not signed) was never this request's.
    const otherwise = row.settlement !== null && row.claimed_otherwise === true;
    const ended = row.settlement === "failed" || row.settlement === "reverted";
    // Ours moved nothing, but another relayer's transaction may have used the authorization, and
    // paid for the request: unless the chain says it is unused, the id stays with it. What the
    // settlement keeps once final is that answer (used-elsewhere.ts): the chain is not asked again.
    if (
      ended &&
      !otherwise &&
      (await authorizationUseOf(
        db,
        chain.authorizationUsed,
        { from: payer as Hex, nonce: row.nonce as Hex },
        row,
      )) !== false
    )
      return { kind: "settled_by", nonce: row.nonce };
    const over = ended || otherwise;
    if (row.settlement !== null && !over) return { kind: "settled_by", nonce: row.nonce };
    if (over || row.lapsed) {
      if (await takeOver(db, request, row.nonce)) return { kind: "bound" };
      continue;
    }
    // Another presentation holds the id and has not claimed its payment yet.
    await sleep(POLL_MS);
  }
}

/**
 * Moves the id from `boundNonce` to this presentation's nonce, if its settlement still does not
 * answer for it (settled, in flight under the id) and it either ended without moving money, was
 * claimed under no id or another, or was never claimed and the hold has lapsed. The binding is
 * locked first and the settlement read in a statement of its own, after the lock: a claim of
 * `boundNonce` holds the binding's lock until it commits (settle.ts claimStatement), so the read
 * sees it. Read in the statement that waited for the lock, a claim committed meanwhile would be
 * missed, and the id would move from a payment being made to a second one.
 */
async function takeOver(db: Db, request: PaymentIdRequest, boundNonce: string): Promise<boolean> {
  const { payer, paymentId, nonce } = request;
  return db.transaction(async (tx) => {
    if (!(await lockBinding(tx, { payer, paymentId, nonce: boundNonce }))) return false;
    const taken = await queryRows<{ nonce: string }>(
      tx,
      sql`update x402_payment_ids p set nonce = ${nonce}, held_until = now() + make_interval(secs => ${HOLD_SECONDS})
          where p.payer = ${payer} and p.payment_id = ${paymentId} and p.nonce = ${boundNonce}
            and not exists (select 1 from x402_settlements s where s.payer = p.payer and s.nonce = p.nonce
              and s.payment_id = p.payment_id and s.status in ('claimed', 'submitted', 'settled'))
            and (p.held_until < now()
              or exists (select 1 from x402_settlements s where s.payer = p.payer and s.nonce = p.nonce))
          returning nonce`,
    );
    return taken.length > 0;
  });
}

/**
 * After this presentation's settle: an id whose payment nothing was claimed for (refused before
 * signing) is free again, so a fresh authorization for the same request may settle. One whose
 * settlement exists stays bound to it: another presentation of the same authorization may have
 * claimed it meanwhile, so the settlement is read only once the binding is locked (takeOver says
 * why).
 */
export async function releasePaymentId(db: Db, request: PaymentIdRequest): Promise<void> {
  await db.transaction(async (tx) => {
    if (!(await lockBinding(tx, request))) return;
    await tx.execute(
      sql`delete from x402_payment_ids p
          where p.payer = ${request.payer} and p.payment_id = ${request.paymentId} and p.nonce = ${request.nonce}
            and not exists (select 1 from x402_settlements s where s.payer = p.payer and s.nonce = p.nonce)`,
    );
  });
}

/** Locks the binding of the id to `nonce`, waiting for any claim that holds it; false when there is none. */
async function lockBinding(tx: Db, binding: Omit<PaymentIdRequest, "fingerprint">): Promise<boolean> {
  const rows = await queryRows(
    tx,
    sql`select 1 from x402_payment_ids
        where payer = ${binding.payer} and payment_id = ${binding.paymentId} and nonce = ${binding.nonce}
        for update`,
  );
  return rows.length > 0;
}

/** True while the id is bound to `nonce`: a settle whose claim found it gone binds it again. */
export async function boundToNonce(db: Db, binding: Omit<PaymentIdRequest, "fingerprint">): Promise<boolean> {
  const rows = await queryRows(
    db,
    sql`select 1 from x402_payment_ids
        where payer = ${binding.payer} and payment_id = ${binding.paymentId} and nonce = ${binding.nonce}`,
  );
  return rows.length > 0;
}

/**
 * A settle of a payment under an id whose binding went (another presentation of the same
 * authorization let it go, refused before signing) or moved before the payment was claimed: the
 * claim refuses a payment under an id that does not name it, and the settle binds the id again.
 */
export class PaymentIdUnbound extends Error {
  constructor() {
    super("the payment id no longer names this authorization");
    this.name = "PaymentIdUnbound";
  }
}
