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
import type { Authorization } from "./payment.ts";
import { respond, type SettleOutcome } from "./settle-answer.ts";
import { unixSeconds } from "./verify.ts";

/** How often a repeated presentation looks at what the earlier one came to. */
const POLL_MS = 50;

/** The hash a settlement row keeps of a payment's payload or requirement. */
export function sha256(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

/**
 * What an earlier presentation of this payment came to, once it names a transaction or ends. The
 * same payload presented again while its authorization is valid is the same payment retried (after
 * `settlement_pending`, or an answer lost on the way): once settled, it is answered as settled,
 * never as a reason to pay again. Another payload for the same (from, nonce), or a presentation
 * after the authorization has expired, learns only that the nonce is used, and by which transaction.
 * A presentation whose payment id names this settlement (payment-ids.ts) is the same request by
 * the payer's own word (`sameRequest`): once settled, it is answered as settled, whenever it comes.
 */
export async function earlierPresentation(
  deps: { db: Db; now: () => Date; receiptTimeoutMs: number },
  payment: { authorization: Pick<Authorization, "from" | "nonce" | "validBefore">; payload: unknown },
  options: { sameRequest?: boolean } = {},
): Promise<SettleOutcome> {
  const { authorization } = payment;
  const payer = authorization.from;
  const deadline = Date.now() + deps.receiptTimeoutMs + 5_000;
  for (;;) {
    const [row] = await queryRows<{
      status: string;
      tx_hash: string | null;
      error_reason: string | null;
      payload_hash: string;
      valid_before: string;
    }>(
      deps.db,
      sql`select status, tx_hash, error_reason, payload_hash, valid_before::text from x402_settlements
          where payer = ${payer} and nonce = ${authorization.nonce}`,
    );
    const final = row && row.status !== "claimed" && row.status !== "submitted";
    if (final || Date.now() > deadline) {
      const tx = row?.tx_hash ?? "";
      const duplicate = (reason: X402Reason): SettleOutcome => ({
        kind: "duplicate",
        response: respond(payer, tx, reason),
      });
      if (!row || row.status === "claimed" || row.status === "submitted") {
        return duplicate(X402_REASONS.settlementPending);
      }
      if (row.status === "settled") {
        const retried =
          options.sameRequest === true ||
          (row.payload_hash === sha256(payment.payload) &&
            BigInt(row.valid_before) > unixSeconds(deps.now()));
        return retried
          ? { kind: "settled", response: respond(payer, tx) }
          : duplicate(X402_REASONS.nonceUsed);
      }
      if (row.status === "reverted") return duplicate(X402_REASONS.transactionFailed);
      return duplicate((row.error_reason as X402Reason | null) ?? X402_REASONS.unexpectedSettleError);
    }
    await sleep(POLL_MS);
  }
}
