/**
 * A settle of a payment that carries a payment id (docs/x402.md#payment-identifiers): the id is
 * bound first (payment-ids.ts), so the same request under the same id settles once, whichever
 * authorization each presentation carries; the same id for another request is a conflict, and
 * settles nothing.
 */
import type { Db } from "../../db/client.ts";
import { earlierPresentation } from "./earlier-presentation.ts";
import { bindPaymentId, type PaymentIdRequest, PaymentIdUnbound, releasePaymentId } from "./payment-ids.ts";
import type { SettleOutcome } from "./settle-answer.ts";
import type { ChainAuthorizationUsed } from "./used-elsewhere.ts";

export type SettleOncePerIdDeps = {
  db: Db;
  receiptTimeoutMs: number;
  /** What the id's second presentation waits beyond the receipt wait (earlier-presentation.ts holdMs). */
  holdBeyondReceiptMs?: number;
  /**
   * Asked, unless the settlement keeps a final answer, before an id whose settlement failed or
   * reverted is given to another authorization, and by the answer from the settlement the id names
   * when that one moved nothing (earlier-presentation.ts).
   */
  chainAuthorizationUsed: ChainAuthorizationUsed;
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS: past validBefore and this, an unused authorization stays unused. */
  validityMarginSeconds: number;
  /** Aborts when the origin stops: the wait on the id's earlier settlement ends (earlier-presentation.ts). */
  stopping?: AbortSignal;
};

/** What a settle came to, and the nonce of the settlement that answers it (its status route's). */
export type SettledUnderId = { outcome: SettleOutcome; nonce: string } | { conflict: true };

export async function settleOncePerId(
  deps: SettleOncePerIdDeps,
  request: PaymentIdRequest,
  settle: () => Promise<SettleOutcome>,
): Promise<SettledUnderId> {
  for (;;) {
    const binding = await bindPaymentId(deps.db, request, {
      authorizationUsed: deps.chainAuthorizationUsed,
      validityMarginSeconds: deps.validityMarginSeconds,
    });
    if (binding.kind === "conflict") return { conflict: true };
    if (binding.kind === "settled_by") {
      const outcome = await earlierPresentation(
        deps,
        // The payload of the bound settlement's own authorization does not matter here: the id says
        // it is the same request.
        {
          authorization: { from: request.payer as `0x${string}`, nonce: binding.nonce as `0x${string}` },
          payload: null,
        },
        { paymentId: request.paymentId },
      );
      return { outcome, nonce: binding.nonce };
    }
    let outcome: SettleOutcome;
    try {
      outcome = await settle();
    } catch (error) {
      // Its binding went before its payment was claimed, and nothing was: bind the id again.
      if (error instanceof PaymentIdUnbound) continue;
      await releasePaymentId(deps.db, request);
      throw error;
    }
    // Settled, or held by an earlier presentation of this payload: a settlement of this nonce
    // exists and keeps the id, so the paid path writes nothing more. Otherwise nothing may have been
    // claimed (refused before signing): then the id is free again.
    if (outcome.kind !== "settled" && outcome.kind !== "duplicate") await releasePaymentId(deps.db, request);
    return { outcome, nonce: request.nonce };
  }
}
