/**
 * A payment presented again while an earlier presentation holds it (x402/settle.ts answers it
 * here): what the earlier one came to, once it names a transaction or ends.
 */
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { sleep } from "../../../shared/sleep.ts";
import { type Db, queryRows } from "../../db/client.ts";
import { canonicalJson } from "../canonical-json.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import { oweLegacyRetry, type PaymentKey, takeLegacyPaidAnswer, takePaidAnswer } from "./paid-answers.ts";
import { respond, type SettleOutcome } from "./settle-answer.ts";
import { usedElsewhereAnswer } from "./settled-outcome.ts";
import {
  type AuthorizationUseColumns,
  authorizationUseColumns,
  authorizationUseOf,
  type ChainAuthorizationUsed,
  type KeptAuthorizationUse,
} from "./used-elsewhere.ts";

/** How often a repeated presentation looks at what the earlier one came to. */
const POLL_MS = 50;

/** The hash a settlement row keeps of a payment's payload or requirement. */
export function sha256(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

/**
 * What an earlier presentation of this payment came to, once it names a transaction or ends. A
 * settled payment is answered as paid once, so that a seller delivers once for it: the paid answer
 * is owed from the commit that stores the settlement (settle.ts storeStatement), and taken by the
 * presentation that settled it, or, where that one was answered otherwise ("present the same
 * payment again": `settlement_pending`, or a database that went away after the commit), by the
 * one later presentation of the same payload that takes it (takePaidAnswer). Any other
 * presentation of a used (from, nonce), the same payload sent
 * again or concurrently included, learns only that the nonce is used, and by which transaction, as
 * the official facilitator answers it: a payer whose answer was lost reads the settlement's status.
 * A presentation under the payment id this settlement was claimed under (`paymentId`, kept with
 * the claim) is the same request by the payer's own word: once settled, it is answered as settled,
 * whenever it comes. Under another id, or none, it is any other presentation: the id is not signed,
 * and anyone holding a settled payment may add one.
 * The id names a settlement only once its claim has committed (payment-ids.ts bindPaymentId waits
 * until then), and a batch removes the claims it signed nothing for in the transaction that made
 * them (settle.ts storeStatement): the row this waits on does not go away, as a claim held within a
 * batch may (heldPresentation).
 */
export function earlierPresentation(
  deps: PresentationDeps,
  payment: Presented,
  options: { paymentId?: string } = {},
): Promise<SettleOutcome> {
  return awaitPresentation(deps, payment, { ...options, deadline: Date.now() + holdMs(deps) });
}

/**
 * As earlierPresentation, for a presentation the outbox found held by another (settle.ts), or
 * "released" once nothing holds it: the holder's claim was let go with nothing signed (its checks
 * refused it, or the chain or the enclave was out of reach), so this presentation may claim it
 * itself. A held claim is only ever let go by deleting it, so a row that is gone is one released.
 */
export function heldPresentation(
  deps: PresentationDeps,
  payment: Presented,
  deadline: number,
  options: { paymentId?: string } = {},
): Promise<SettleOutcome | "released"> {
  return awaitPresentation(deps, payment, { ...options, deadline, released: true });
}

/**
 * What a presentation waits for the one holding its payment beyond that one's receipt wait: the
 * holder claims, reads the chain, signs and broadcasts before its receipt wait begins.
 */
export const HOLD_BEYOND_RECEIPT_MS = 5_000;

/** How long a presentation waits for the one holding its payment: that one's receipt wait, and more. */
export function holdMs(deps: { receiptTimeoutMs: number; holdBeyondReceiptMs?: number }): number {
  return deps.receiptTimeoutMs + (deps.holdBeyondReceiptMs ?? HOLD_BEYOND_RECEIPT_MS);
}

type PresentationDeps = {
  db: Db;
  receiptTimeoutMs: number;
  /** HOLD_BEYOND_RECEIPT_MS by default; a test's origin may wait less (compose.ts x402HoldBeyondReceiptMs). */
  holdBeyondReceiptMs?: number;
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS: past validBefore and this, an unused authorization stays unused. */
  validityMarginSeconds: number;
  /**
   * Asked of a settlement that moved nothing whether another transaction used its authorization,
   * unless the settlement says so already. Absent: answered from the settlement as it stands.
   */
  chainAuthorizationUsed?: ChainAuthorizationUsed;
  /**
   * Aborts when the origin stops: the wait ends as at its deadline, answered as the settlement
   * stands, rather than outlast the server's drain and have its request cut with no answer.
   */
  stopping?: AbortSignal;
};
type Presented = {
  authorization: PaymentKey;
  payload: unknown;
};

type AwaitOptions = { paymentId?: string; deadline: number; released?: boolean };

function awaitPresentation(
  deps: PresentationDeps,
  payment: Presented,
  options: AwaitOptions & { released: true },
): Promise<SettleOutcome | "released">;
function awaitPresentation(
  deps: PresentationDeps,
  payment: Presented,
  options: AwaitOptions & { released?: false },
): Promise<SettleOutcome>;
async function awaitPresentation(
  deps: PresentationDeps,
  payment: Presented,
  options: AwaitOptions,
): Promise<SettleOutcome | "released"> {
  const { authorization } = payment;
  const payer = authorization.from;
  for (;;) {
    const [row] = await queryRows<
      {
        status: string;
        tx_hash: string | null;
        error_reason: string | null;
        /** Null: the settlement has no x402_paid_answers row (stored by an earlier version). */
        paid_answer_owed: boolean | null;
        retry_owed: boolean;
        payment_id: string | null;
        authorization_used_elsewhere: boolean | null;
      } & AuthorizationUseColumns
    >(
      deps.db,
      sql`select status, tx_hash, error_reason, retry_owed, payment_id, authorization_used_elsewhere,
            (select a.taken_at is null from x402_paid_answers a where a.settlement_id = x.id) as paid_answer_owed, ${authorizationUseColumns(deps.validityMarginSeconds)}
          from x402_settlements x
          where payer = ${payer} and nonce = ${authorization.nonce}`,
    );
    // Past the deadline even a released claim is answered as pending: a payment that others keep
    // claiming and letting go is not presented again forever. An origin stopping is past it.
    const past = Date.now() > options.deadline || deps.stopping?.aborted === true;
    if (!row && options.released && !past) return "released";
    const final = row && row.status !== "claimed" && row.status !== "submitted";
    if (final || past) {
      const tx = row?.tx_hash ?? "";
      const duplicate = (reason: X402Reason): SettleOutcome => ({
        kind: "duplicate",
        response: respond(payer, tx, reason),
      });
      // Nothing more is owed for a settlement this version stores: the commit that stores it owes
      // its one answer (x402_paid_answers), and owing another would pay a second presentation once
      // the settling one took its own. One an origin of the earlier version stores (no row) is
      // owed as that version owes it: by its pending answers, in its column, which it reads too.
      if (!row || row.status === "claimed" || row.status === "submitted") {
        if (row && row.paid_answer_owed === null) await oweLegacyRetry(deps.db, authorization);
        return duplicate(X402_REASONS.settlementPending);
      }
      if (row.status === "settled") {
        const sameRequest = options.paymentId !== undefined && row.payment_id === options.paymentId;
        // The same request by its id is answered paid whatever its payload, and takes with it the
        // paid answer the settlement owes: no presentation of the payload without the id is paid after.
        // Kept in its own table, or, for a settlement an origin of the earlier version stored, in the
        // settlement's column, where that version owes it to a presentation it answered pending.
        const legacy = row.paid_answer_owed === null;
        const owed = legacy ? row.retry_owed : row.paid_answer_owed;
        const take = legacy ? takeLegacyPaidAnswer : takePaidAnswer;
        if (sameRequest && owed) await take(deps.db, authorization);
        // Claimed under an id, the answer is that id's: its presentations are paid whenever they
        // come, so a presentation without it taking the answer too would be a second paid answer.
        const ownsAnswer = row.payment_id === null;
        const paid =
          sameRequest ||
          (owed && ownsAnswer && (await take(deps.db, authorization, sha256(payment.payload))));
        return paid ? { kind: "settled", response: respond(payer, tx) } : duplicate(X402_REASONS.nonceUsed);
      }
      const ended = duplicate(
        row.status === "reverted"
          ? X402_REASONS.transactionFailed
          : ((row.error_reason as X402Reason | null) ?? X402_REASONS.unexpectedSettleError),
      );
      // Ours moved nothing (reverted, or never mined), but the payment may have reached the payee
      // (used-elsewhere.ts): say so.
      return (await usedElsewhere(deps, authorization, row))
        ? { ...ended, response: usedElsewhereAnswer(ended.response) }
        : ended;
    }
    await sleep(POLL_MS, deps.stopping);
  }
}

/**
 * Whether another transaction used the authorization of a settlement that moved nothing: as the
 * settlement keeps it once that can no longer change (used, or unused as read past validBefore:
 * used-elsewhere.ts); otherwise the chain is asked (nobody may have asked yet: a revert the revert
 * guard never looked at, a failed settlement whose status nobody read), and the chain out of reach
 * leaves it as the settlement says.
 */
async function usedElsewhere(
  deps: PresentationDeps,
  authorization: PaymentKey,
  row: KeptAuthorizationUse,
): Promise<boolean> {
  const kept = row.authorization_used_elsewhere === true;
  if (!deps.chainAuthorizationUsed) return kept;
  const used = await authorizationUseOf(deps.db, deps.chainAuthorizationUsed, authorization, row).catch(
    () => undefined,
  );
  return used === undefined ? kept : used;
}
